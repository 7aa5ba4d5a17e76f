package audit

import (
	"sync"

	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// idCache remembers the redacted form of the session ids and subjects every
// event carries: the six events of a tool call repeat the same two, and
// redacting them again for each event was about 2 % of the bridge's CPU per
// sequential call. The redacted form is a function of the
// redactor and the string, so a cached one is what redacting would give;
// a new redactor (SetRedactor) starts the cache anew.
type idCache struct {
	mu sync.RWMutex
	r  *redact.Redactor
	m  map[string]string
}

// maxCachedIDs bounds the cache: past it, it starts anew (sessions come and
// go, and a busy bridge's recent ones are the ones its events name).
const maxCachedIDs = 1024

// redacted is r.String(s), from the cache when r redacted s before.
func (c *idCache) redacted(r *redact.Redactor, s string) string {
	if s == "" {
		return s
	}
	c.mu.RLock()
	out, ok := c.m[s]
	ok = ok && c.r == r
	c.mu.RUnlock()
	if ok {
		return out
	}
	out = r.String(s, nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r != r || len(c.m) >= maxCachedIDs {
		clear(c.m)
		c.r = r
	}
	if c.m == nil {
		c.m = make(map[string]string)
	}
	c.m[s] = out
	return out
}
