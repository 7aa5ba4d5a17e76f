package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	mcpclient "github.com/mcp-operator/mcp-operator/internal/mcp/client"
	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/mcp/streamhttp"
)

// A call's kind, and how often an agent makes it (weights).
var opWeights = []struct {
	op     string
	weight int
}{
	{"allowed", 40}, {"large", 5}, {"denied", 10}, {"ask", 4}, {"confirm", 6},
	{"resource", 10}, {"prompt", 10}, {"progress", 8}, {"subscribe", 7},
}

// The bridge's own bounds on one call: its deadline upstream (its
// --call-timeout default) and the soak's policies' approval timeout. An
// ask waits for a person up to approvalTimeout and then goes upstream.
const (
	bridgeCallTimeout = time.Minute
	approvalTimeout   = 2 * time.Minute
)

// callTimeout bounds one call from the agent's side: longer than the
// longest the bridge may rightly take (an ask approved at the end of its
// wait, then a full upstream deadline, and the bridge's bounded writes of
// the approval's outcome), so a call still unanswered then is lost.
const callTimeout = approvalTimeout + bridgeCallTimeout + time.Minute

// record is one call as the agent saw it.
type record struct {
	op, id  string
	server  string
	start   time.Time
	took    time.Duration
	ok      bool
	code    int
	reason  string
	hasHint bool   // the error's data says whether a retry is safe
	lost    bool   // no answer at all (a transport failure or the agent's own timeout)
	notSent bool   // the request was never written: no connection to a replica (refused, or the dial failed); safe to retry
	via     string // where the call went: the Service, or the replica picked
	errText string
}

// target names what the agents call on the sample everything server, read
// from its catalog at the start.
type target struct {
	progressTool string // a tool that streams progress
	resourceURI  string // a resource, as /mcp names it
	prompt       string // a prompt without required arguments
}

// load is the agents' side of the soak.
type load struct {
	bridgeURL string
	tokens    []string // one per agent; session i is agent i mod len
	target    target
	replicas  *replicaSet

	mu      sync.Mutex
	records []record
	replays replayCounts
}

// replayCounts are the sealed states sent again to every replica.
type replayCounts struct {
	states   int // allow-once states replayed
	sent     int // replays sent (states × replicas)
	refused  int // refused -32602 (spent)
	accepted int // answered with a result: the state worked again
	other    int // refused otherwise, or not answered
}

func (l *load) add(r record) {
	l.mu.Lock()
	l.records = append(l.records, r)
	l.mu.Unlock()
}

// run keeps sessions agents connected until ctx ends, calling at rate calls
// per second in all.
func (l *load) run(ctx context.Context, sessions int, rate float64) {
	ticks := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				close(ticks)
				return
			case <-t.C:
				select {
				case ticks <- struct{}{}:
				default: // every agent busy: the rate is what they can take
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range sessions {
		era := mcpclient.EraSession
		if i%2 == 1 {
			era = mcpclient.EraStateless
		}
		wg.Go(func() { l.agent(ctx, i, l.tokens[i%len(l.tokens)], era, ticks) })
	}
	wg.Wait()
}

// agent is one agent session: it connects, calls on each tick it takes,
// and reconnects only when its session is gone. A 2025-11-25 agent calls
// through the bridge's Service (its session affinity keeps a session on one
// replica); a 2026-07-28 agent, which needs no affinity, sends each call
// to a replica picked at random, as a load balancer without affinity does,
// and its answer to a question to another one.
func (l *load) agent(ctx context.Context, n int, token string, era mcpclient.Era, ticks <-chan struct{}) {
	var c *mcpclient.Client
	via := l.bridgeURL
	seq := 0
	for range ticks {
		if era == mcpclient.EraStateless {
			var err error
			if c, via, err = l.replicas.pick(ctx, token, ""); err != nil {
				l.add(record{op: "connect", start: time.Now(), notSent: true, errText: err.Error()})
				continue
			}
		} else if c == nil {
			var err error
			if c, err = l.connect(ctx, token, era); err != nil {
				l.add(record{op: "connect", start: time.Now(), lost: !isAnswer(err), errText: err.Error()})
				c = nil
				continue
			}
		}
		seq++
		op := pickOp()
		if era == mcpclient.EraStateless && (op == "ask" || op == "subscribe") {
			op = "confirm"
		} else if era == mcpclient.EraSession && op == "confirm" {
			op = "ask"
		}
		r := l.call(c, token, op, fmt.Sprintf("a%d-%d", n, seq))
		r.via = via
		l.add(r)
		if era == mcpclient.EraSession && strings.Contains(r.errText, "404") {
			_ = c.Close()
			c = nil // the session ended: a new one, as an agent would
		}
	}
	if c != nil && era == mcpclient.EraSession {
		_ = c.Close()
	}
}

func (l *load) connect(ctx context.Context, token string, era mcpclient.Era) (*mcpclient.Client, error) {
	conn, err := streamhttp.New(streamhttp.Options{URL: l.bridgeURL, BearerToken: token})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := mcpclient.Options{ClientName: "soak-agent", ClientVersion: "1", Era: era}
	if era == mcpclient.EraStateless {
		// Asked by elicitation: input_required, answered in the retry.
		opts.Capabilities = map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	}
	return mcpclient.Connect(cctx, conn, opts)
}

func pickOp() string {
	total := 0
	for _, w := range opWeights {
		total += w.weight
	}
	n := rand.IntN(total)
	for _, w := range opWeights {
		if n < w.weight {
			return w.op
		}
		n -= w.weight
	}
	return "allowed"
}

// call makes one call of kind op, id in its arguments, and says how it went.
func (l *load) call(c *mcpclient.Client, token, op, id string) record {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	r := record{op: op, id: id, server: recorderName, start: time.Now()}
	args := json.RawMessage(`{"id":"` + id + `"}`)
	var err error
	var res json.RawMessage
	switch op {
	case "allowed", "ask":
		tool := "record"
		if op == "ask" {
			tool = "ask"
		}
		res, err = c.CallTool(ctx, "mcp."+recorderName+"."+tool, args)
		if err == nil && !strings.Contains(string(res), "ran "+id) {
			err = fmt.Errorf("an answer of another call: %.200s", res)
		}
	case "large":
		res, err = c.CallTool(ctx, "mcp."+recorderName+".large", json.RawMessage(`{"id":"`+id+`","size":1048576}`))
		if err == nil && len(res) < 1<<20 {
			err = fmt.Errorf("a large result of %d bytes", len(res))
		}
	case "denied":
		_, err = c.CallTool(ctx, "mcp."+recorderName+".forbidden", args)
		if err == nil {
			err = errors.New("a denied call was answered with a result")
		}
	case "confirm":
		err = l.confirm(ctx, c, token, id)
	case "resource":
		r.server = "everything"
		_, err = c.Call(ctx, "resources/read", json.RawMessage(`{"uri":`+quote(l.target.resourceURI)+`}`))
	case "prompt":
		r.server = "everything"
		_, err = c.Call(ctx, "prompts/get", json.RawMessage(`{"name":`+quote(l.target.prompt)+`}`))
	case "progress":
		r.server = "everything"
		_, err = c.CallToolParams(ctx, json.RawMessage(`{"name":`+quote(l.target.progressTool)+`,"arguments":{},"_meta":{"progressToken":`+quote(id)+`}}`))
	case "subscribe":
		r.server = "everything"
		uri := json.RawMessage(`{"uri":` + quote(l.target.resourceURI) + `}`)
		if _, err = c.Call(ctx, "resources/subscribe", uri); err == nil {
			_, err = c.Call(ctx, "resources/unsubscribe", uri)
		}
	}
	r.took = time.Since(r.start)
	r.ok = err == nil
	if err != nil {
		r.errText = err.Error()
		var rpc *jsonrpc.Error
		switch {
		case op == "denied" && errors.As(err, &rpc) && rpc.Code == -32010:
			r.ok, r.errText = true, "" // the denial is the answer wanted
		case errors.As(err, &rpc):
			r.code = rpc.Code
			var data struct {
				Reason    string `json:"reason"`
				Retryable *bool  `json:"retryable"`
			}
			_ = json.Unmarshal(rpc.Data, &data)
			r.reason, r.hasHint = data.Reason, data.Retryable != nil
		case notDelivered(err):
			r.notSent = true
		default:
			r.lost = true
		}
	}
	return r
}

// confirm calls the tool the policy asks the agent's own client about: the
// bridge answers input_required with a sealed state; the agent answers
// allow_once and retries; then the same retry is sent to every replica,
// where each must refuse it (spent), so the tool runs once.
func (l *load) confirm(ctx context.Context, c *mcpclient.Client, token, id string) error {
	name := "mcp." + recorderName + ".confirm"
	res, err := c.CallTool(ctx, name, json.RawMessage(`{"id":"`+id+`"}`))
	if err != nil {
		return err
	}
	var asked struct {
		ResultType   string `json:"resultType"`
		RequestState string `json:"requestState"`
	}
	_ = json.Unmarshal(res, &asked)
	if asked.ResultType != "input_required" || asked.RequestState == "" {
		return fmt.Errorf("no input_required for an asking policy: %.200s", res)
	}
	retry := json.RawMessage(`{"name":` + quote(name) + `,"arguments":{"id":` + quote(id) + `},` +
		`"inputResponses":{"approval":{"action":"accept","content":{"decision":"allow_once"}}},"requestState":` + quote(asked.RequestState) + `}`)
	// The answer goes to another replica where there is one (the Service's
	// choice for a 2025-11-25 agent).
	if c.Era() == mcpclient.EraStateless {
		if other, _, perr := l.replicas.pick(ctx, token, c.Conn()); perr == nil {
			c = other
		}
	}
	res, err = c.CallToolParams(ctx, retry)
	if err != nil {
		return err
	}
	if !strings.Contains(string(res), "ran "+id) {
		return fmt.Errorf("an answer of another call: %.200s", res)
	}
	l.replay(ctx, token, retry)
	return nil
}

// replay sends an allow-once retry again to each bridge replica directly.
func (l *load) replay(ctx context.Context, token string, retry json.RawMessage) {
	var counts replayCounts
	counts.states = 1
	for _, url := range l.replicas.urls() {
		c, err := l.replicas.client(ctx, url, token)
		if err != nil {
			counts.other++
			continue
		}
		counts.sent++
		_, err = c.CallToolParams(ctx, retry)
		var rpc *jsonrpc.Error
		switch {
		case err == nil:
			counts.accepted++
		case errors.As(err, &rpc) && rpc.Code == -32602:
			counts.refused++
		default:
			counts.other++
		}
	}
	l.mu.Lock()
	l.replays.states += counts.states
	l.replays.sent += counts.sent
	l.replays.refused += counts.refused
	l.replays.accepted += counts.accepted
	l.replays.other += counts.other
	l.mu.Unlock()
}

// notDelivered says whether err is a request that provably reached no
// replica: no connection could be made (refused, no route, or the dial
// timed out: a replica gone between the look-up of the replicas and the
// call, its pod address no longer answering), so nothing was written.
// A request that failed on a connection it was written to (EOF, reset)
// may have been read: it is not counted here.
func notDelivered(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "no route to host") || strings.Contains(err.Error(), ": dial tcp ")
}

// isAnswer says whether err is a JSON-RPC answer (not a lost request).
func isAnswer(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
