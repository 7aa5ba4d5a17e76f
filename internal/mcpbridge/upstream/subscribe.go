package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
	"github.com/mcp-operator/mcp-operator/internal/rawjson"
)

// Resource subscriptions. The Conn does not count subscribers: the bridge
// does, and Options.Subscribed tells the Conn which URIs someone wants now.
// A keeper goroutine makes the server hold exactly those, level-based: on
// every connection the Conn makes (after a broken one, and on the Conn that
// replaces a retired one) it establishes them again.
//
//   - session era: the session's standalone GET stream (where a server
//     sends notifications/resources/updated) and resources/subscribe per
//     URI, resources/unsubscribe when a URI is no longer wanted;
//   - stateless era (2026-07-28), which has neither: one subscriptions/listen
//     stream naming every wanted URI in resourceSubscriptions. Its set is
//     fixed when it opens, so a change opens a new stream and closes the
//     old one once the new one is acknowledged (no gap).

// ErrSubscribeUnsupported says the server does not offer resources.subscribe.
var ErrSubscribeUnsupported = errors.New("the server does not offer resource subscriptions (capability resources.subscribe)")

const (
	// listenRefresh bounds the life of one stateless listen stream (a call
	// needs a deadline); the keeper opens the next one before it ends.
	listenRefresh = time.Hour
	// keeperMaxBackoff caps the wait between attempts after failures.
	keeperMaxBackoff = 10 * time.Second
)

// subs is the keeper's state.
type subs struct {
	once sync.Once
	kick chan struct{}

	mu   sync.Mutex
	cond *sync.Cond
	pass uint64             // completed reconcile passes
	have map[string]bool    // URIs the server holds for us now
	errs map[string]error   // why a wanted URI is not held
	cli  *client.Client     // the client have is about
	stop context.CancelFunc // ends the stream of cli
}

// Subscribe makes sure the server holds uri (which Options.Subscribed must
// list by now) and returns once it does, or why it cannot.
func (c *Conn) Subscribe(ctx context.Context, uri string) error {
	s := c.keeper()
	s.mu.Lock()
	start := s.pass
	s.mu.Unlock()
	c.Resubscribe()
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	stopLife := context.AfterFunc(c.subsLife, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stopLife()
	s.mu.Lock()
	defer s.mu.Unlock()
	// The pass running when we kicked may have missed uri: wait for the
	// one after it.
	for s.pass < start+2 && !s.have[uri] && s.errs[uri] == nil {
		if err := context.Cause(c.subsLife); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.cond.Wait()
	}
	switch {
	case s.have[uri]:
		return nil
	case s.errs[uri] != nil:
		return s.errs[uri]
	}
	return fmt.Errorf("while subscribing to %s: the server did not take the subscription", uri)
}

// Resubscribe tells the keeper that the wanted URIs changed (or must be
// established again): it reconciles in the background.
func (c *Conn) Resubscribe() {
	s := c.keeper()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (c *Conn) keeper() *subs {
	c.subs.once.Do(func() {
		c.subs.kick = make(chan struct{}, 1)
		c.subs.cond = sync.NewCond(&c.subs.mu)
		c.subs.have, c.subs.errs = map[string]bool{}, map[string]error{}
		go c.keep()
	})
	return &c.subs
}

// keep reconciles on every kick until the Conn is retired; a pass that
// failed is tried again after a growing delay.
func (c *Conn) keep() {
	s := &c.subs
	backoff := 250 * time.Millisecond
	var retry <-chan time.Time
	for {
		select {
		case <-c.subsLife.Done():
			s.mu.Lock()
			if s.stop != nil {
				s.stop()
			}
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		case <-s.kick:
		case <-retry:
		}
		retry = nil
		if err := c.reconcile(); err != nil {
			c.opts.Log.Info("resource subscriptions not established; trying again", "server", c.target.Namespace+"/"+c.target.Name, "in", backoff.String(), "error", err.Error())
			retry = time.After(backoff)
			backoff = min(2*backoff, keeperMaxBackoff)
		} else {
			backoff = 250 * time.Millisecond
		}
		s.mu.Lock()
		s.pass++
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// reconcile makes the server hold the wanted URIs. An error means "try
// again later"; a URI the server refuses is recorded in errs instead.
func (c *Conn) reconcile() error {
	s := &c.subs
	var wanted []string
	if c.opts.Subscribed != nil {
		wanted = c.opts.Subscribed()
	}
	s.mu.Lock()
	held := len(s.have) > 0
	s.mu.Unlock()
	if len(wanted) == 0 && !held {
		c.endStream(nil)
		return nil
	}
	ctx, cancel := context.WithTimeout(c.subsLife, c.opts.DialTimeout)
	defer cancel()
	// Held as a call holds it: a relearn that replaces the shared
	// connection closes this one only once the pass on it ended.
	cli, l, err := c.sharedClient(ctx)
	if err != nil {
		return err
	}
	defer c.release(l, cli)
	s.mu.Lock()
	if s.cli != cli {
		// A new connection holds nothing yet.
		if s.stop != nil {
			s.stop()
		}
		s.cli, s.stop, s.have = cli, nil, map[string]bool{}
	}
	s.errs = map[string]error{}
	s.mu.Unlock()
	if !cli.Capabilities().ResourcesSubscribe {
		c.failAll(wanted, ErrSubscribeUnsupported)
		return nil
	}
	if cli.Era() == client.EraStateless {
		return c.reconcileListen(cli, wanted)
	}
	return c.reconcileSession(ctx, cli, wanted)
}

func (c *Conn) failAll(uris []string, err error) {
	s := &c.subs
	s.mu.Lock()
	for _, u := range uris {
		s.errs[u] = err
	}
	s.mu.Unlock()
}

// endStream stops the stream of cli (any when nil) and forgets what it
// held; false when cli held none.
func (c *Conn) endStream(cli *client.Client) bool {
	s := &c.subs
	s.mu.Lock()
	defer s.mu.Unlock()
	if cli != nil && s.cli != cli {
		return false
	}
	if s.stop != nil {
		s.stop()
	}
	s.cli, s.stop, s.have = nil, nil, map[string]bool{}
	return true
}

// streamEnded is called when the stream of cli ends on its own: what it
// held is gone, so the next pass dials again and establishes everything.
// In the session era a connection whose GET stream is gone for good is
// dropped (its session may be gone too); a stateless one is kept.
func (c *Conn) streamEnded(cli *client.Client, err error) {
	if c.subsLife.Err() != nil {
		return
	}
	c.opts.Log.Info("the stream that carries resource updates ended; subscriptions are established again", "server", c.target.Namespace+"/"+c.target.Name, "error", fmt.Sprint(err))
	c.endStream(cli)
	if cli.Era() == client.EraSession && !errors.Is(err, streamhttp.ErrNoStandaloneStream) {
		c.drop(&c.shared, cli) // subscriptions are held on the shared connection
	}
	c.Resubscribe()
}

// reconcileSession: the GET stream, then resources/subscribe and
// resources/unsubscribe for the difference.
func (c *Conn) reconcileSession(ctx context.Context, cli *client.Client, wanted []string) error {
	s := &c.subs
	sc, ok := cli.Conn().(*streamhttp.Conn)
	if !ok {
		return errors.New("resource subscriptions need a Streamable HTTP connection")
	}
	s.mu.Lock()
	running := s.stop != nil
	s.mu.Unlock()
	if !running && len(wanted) > 0 {
		sctx, stop := context.WithCancel(c.subsLife)
		opened := make(chan struct{})
		ended := make(chan error, 1)
		var once sync.Once
		go func() {
			err := sc.Listen(sctx, func() { once.Do(func() { close(opened) }) })
			ended <- err
			if sctx.Err() == nil {
				c.streamEnded(cli, err)
			}
		}()
		select {
		case <-opened:
		case err := <-ended:
			stop()
			if errors.Is(err, streamhttp.ErrNoStandaloneStream) {
				// Updates could never arrive: refuse rather than pretend.
				c.failAll(wanted, fmt.Errorf("the server offers resource subscriptions but no stream to send updates on: %w", err))
				return nil
			}
			return fmt.Errorf("while opening the standalone GET stream: %w", err)
		case <-ctx.Done():
			stop()
			return fmt.Errorf("while opening the standalone GET stream: %w", ctx.Err())
		}
		s.mu.Lock()
		s.stop = stop
		s.mu.Unlock()
	}
	s.mu.Lock()
	have := maps.Clone(s.have)
	s.mu.Unlock()
	var failed error
	for _, u := range wanted {
		if have[u] {
			continue
		}
		_, err := cli.Call(ctx, "resources/subscribe", subscribeParams(u))
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &rpcErr):
			c.failAll([]string{u}, rpcErr)
		case err != nil:
			failed = err
		default:
			s.mu.Lock()
			if s.cli == cli {
				s.have[u] = true
			}
			s.mu.Unlock()
		}
	}
	for u := range have {
		if slices.Contains(wanted, u) {
			continue
		}
		s.mu.Lock()
		delete(s.have, u)
		s.mu.Unlock()
		if _, err := cli.Call(ctx, "resources/unsubscribe", subscribeParams(u)); err != nil {
			c.opts.Log.Info("resources/unsubscribe failed", "server", c.target.Namespace+"/"+c.target.Name, "uri", u, "error", err.Error())
		}
	}
	if len(wanted) == 0 {
		c.endStream(cli)
	}
	return failed
}

func subscribeParams(uri string) json.RawMessage {
	return append(rawjson.AppendString([]byte(`{"uri":`), uri), '}')
}

// reconcileListen opens a subscriptions/listen stream for wanted when the
// one open holds another set, and closes the old one once the new one is
// acknowledged.
func (c *Conn) reconcileListen(cli *client.Client, wanted []string) error {
	s := &c.subs
	s.mu.Lock()
	same := s.stop != nil && len(s.have) == len(wanted)
	for _, u := range wanted {
		same = same && s.have[u]
	}
	s.mu.Unlock()
	if same {
		return nil
	}
	if len(wanted) == 0 {
		c.endStream(cli)
		return nil
	}
	params, _ := json.Marshal(map[string]any{"notifications": map[string]any{"resourceSubscriptions": wanted}})
	lctx, stop := context.WithTimeout(c.subsLife, listenRefresh)
	acked := make(chan []string, 1)
	ended := make(chan error, 1)
	lctx = streamhttp.WithCallNotifications(lctx, func(m *jsonrpc.Message) {
		switch m.Method {
		case "notifications/subscriptions/acknowledged":
			var p struct {
				Notifications struct {
					ResourceSubscriptions []string `json:"resourceSubscriptions"`
				} `json:"notifications"`
			}
			_ = json.Unmarshal(m.Params, &p)
			select {
			case acked <- p.Notifications.ResourceSubscriptions:
			default:
			}
		case "notifications/resources/updated":
			c.onNotification(m)
		}
	})
	go func() {
		_, err := cli.Call(lctx, "subscriptions/listen", params)
		ended <- err
		if lctx.Err() == nil || errors.Is(lctx.Err(), context.DeadlineExceeded) {
			if err == nil {
				err = errors.New("the server ended the subscriptions/listen stream")
			}
			c.streamEnded(cli, err)
		}
	}()
	t := time.NewTimer(c.opts.DialTimeout)
	defer t.Stop()
	select {
	case got := <-acked:
		s.mu.Lock()
		old := s.stop
		if s.cli == cli {
			s.stop, s.have = stop, map[string]bool{}
			for _, u := range got {
				s.have[u] = true
			}
			for _, u := range wanted {
				if !s.have[u] {
					s.errs[u] = errors.New("the server did not acknowledge the subscription to " + u)
				}
			}
		} else {
			old = stop
		}
		s.mu.Unlock()
		if old != nil {
			old()
		}
		return nil
	case err := <-ended:
		stop()
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			c.failAll(wanted, rpcErr)
			return nil
		}
		return fmt.Errorf("while opening subscriptions/listen: %w", err)
	case <-t.C:
		stop()
		return errors.New("while opening subscriptions/listen: no acknowledgement in time")
	}
}
