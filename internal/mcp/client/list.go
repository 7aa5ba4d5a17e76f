package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Limits bound a paginated list: a server must not make us loop or hoard.
type Limits struct {
	MaxPages int   // pages fetched (default 100)
	MaxItems int   // items in total (default 10,000)
	MaxBytes int64 // bytes of results in total (default 16 MiB)
}

// DefaultLimits are the bounds used when a field is zero.
var DefaultLimits = Limits{MaxPages: 100, MaxItems: 10000, MaxBytes: 16 << 20}

func (l Limits) withDefaults() Limits {
	if l.MaxPages <= 0 {
		l.MaxPages = DefaultLimits.MaxPages
	}
	if l.MaxItems <= 0 {
		l.MaxItems = DefaultLimits.MaxItems
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	return l
}

// LimitError says which bound a list exceeded.
type LimitError struct {
	Method string
	Bound  string // maxPages, maxItems or maxBytes
	Limit  int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("while listing (%s): the server's list exceeds %d (bound %s)", e.Method, e.Limit, e.Bound)
}

// ListTools lists every tool, each as the raw JSON the server sent.
func (c *Client) ListTools(ctx context.Context, lim Limits) ([]json.RawMessage, error) {
	if !c.caps.Tools {
		return nil, fmt.Errorf("while listing tools: %w", ErrNotAdvertised)
	}
	items, err := c.ListAll(ctx, "tools/list", "tools", lim)
	if err == nil {
		c.learnParamHeaders(items)
	}
	return items, err
}

// ListResources lists every resource, raw.
func (c *Client) ListResources(ctx context.Context, lim Limits) ([]json.RawMessage, error) {
	if !c.caps.Resources {
		return nil, fmt.Errorf("while listing resources: %w", ErrNotAdvertised)
	}
	return c.ListAll(ctx, "resources/list", "resources", lim)
}

// ListPrompts lists every prompt, raw.
func (c *Client) ListPrompts(ctx context.Context, lim Limits) ([]json.RawMessage, error) {
	if !c.caps.Prompts {
		return nil, fmt.Errorf("while listing prompts: %w", ErrNotAdvertised)
	}
	return c.ListAll(ctx, "prompts/list", "prompts", lim)
}

// Freshness is how long a server said a list may be cached (the
// 2026-07-28 ttlMs of each page, the least of them; a negative one counts
// as 0, one past MaxTTL as MaxTTL). Given is false when a page said
// nothing: the caller keeps its own rules then.
type Freshness struct {
	TTL   time.Duration
	Given bool
}

// MaxTTL is the longest a list is taken to be fresh, whatever a server
// says: a ttlMs past what a Duration holds would overflow into a negative
// or arbitrary one, and a day is long for a list a server may change.
const MaxTTL = 24 * time.Hour

// ListAll follows nextCursor through every page of method, collecting the
// array under key, within lim.
func (c *Client) ListAll(ctx context.Context, method, key string, lim Limits) ([]json.RawMessage, error) {
	items, _, err := c.ListAllFresh(ctx, method, key, lim)
	return items, err
}

// ListAllFresh is ListAll that also says how long the list is fresh.
func (c *Client) ListAllFresh(ctx context.Context, method, key string, lim Limits) ([]json.RawMessage, Freshness, error) {
	lim = lim.withDefaults()
	fresh := Freshness{Given: true}
	var items []json.RawMessage
	var total int64
	seen := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		if page > lim.MaxPages {
			return nil, Freshness{}, &LimitError{Method: method, Bound: "maxPages", Limit: int64(lim.MaxPages)}
		}
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		result, err := c.Call(ctx, method, params)
		if err != nil {
			return nil, Freshness{}, fmt.Errorf("while listing (%s), page %d: %w", method, page, err)
		}
		total += int64(len(result))
		if total > lim.MaxBytes {
			return nil, Freshness{}, &LimitError{Method: method, Bound: "maxBytes", Limit: lim.MaxBytes}
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(result, &res); err != nil {
			return nil, Freshness{}, fmt.Errorf("while listing (%s), page %d: the result is not a JSON object: %w", method, page, err)
		}
		var pageItems []json.RawMessage
		if err := json.Unmarshal(res[key], &pageItems); err != nil || res[key] == nil {
			return nil, Freshness{}, fmt.Errorf("while listing (%s), page %d: the result has no %q array", method, page, key)
		}
		if len(items)+len(pageItems) > lim.MaxItems {
			return nil, Freshness{}, &LimitError{Method: method, Bound: "maxItems", Limit: int64(lim.MaxItems)}
		}
		items = append(items, pageItems...)
		fresh = fresh.page(res["ttlMs"], page == 1)
		next := ""
		if raw, ok := res["nextCursor"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &next); err != nil {
				return nil, Freshness{}, fmt.Errorf("while listing (%s), page %d: nextCursor is not a string", method, page)
			}
		}
		if next == "" {
			return items, fresh, nil
		}
		if seen[next] {
			return nil, Freshness{}, fmt.Errorf("while listing (%s), page %d: the server sent cursor %q twice (a pagination loop)", method, page, next)
		}
		seen[next] = true
		cursor = next
	}
}

// page is f with one more page's ttlMs (raw, nil when the page had none).
func (f Freshness) page(raw json.RawMessage, first bool) Freshness {
	var ms float64
	if raw == nil || json.Unmarshal(raw, &ms) != nil || !f.Given {
		return Freshness{}
	}
	ttl := time.Duration(min(max(ms, 0), float64(MaxTTL.Milliseconds()))) * time.Millisecond
	if first || ttl < f.TTL {
		f.TTL = ttl
	}
	return f
}
