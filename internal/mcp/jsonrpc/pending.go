package jsonrpc

import (
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
)

// Pending correlates responses with the calls waiting for them, for
// transports where responses arrive on a shared stream (stdio). Ids are
// numbers this side hands out, so a server cannot answer a call it was never
// sent.
type Pending struct {
	next  atomic.Int64
	mu    sync.Mutex
	calls map[string]chan *Message
}

// Add assigns req a fresh id and returns the channel its response arrives on.
func (p *Pending) Add(req *Message) <-chan *Message {
	id := p.next.Add(1)
	req.ID = json.RawMessage(strconv.FormatInt(id, 10))
	ch := make(chan *Message, 1)
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]chan *Message{}
	}
	p.calls[string(req.ID)] = ch
	p.mu.Unlock()
	return ch
}

// Remove forgets a call that ended without a response (timeout, cancel).
func (p *Pending) Remove(id json.RawMessage) {
	p.mu.Lock()
	delete(p.calls, string(id))
	p.mu.Unlock()
}

// Deliver hands a response to its call; it reports false for an id nobody
// waits for (a late answer to a cancelled call, or a server's invention).
func (p *Pending) Deliver(m *Message) bool {
	p.mu.Lock()
	ch, ok := p.calls[string(m.ID)]
	delete(p.calls, string(m.ID))
	p.mu.Unlock()
	if ok {
		ch <- m
	}
	return ok
}

// NextID hands out an id for a transport that correlates by itself (HTTP).
func (p *Pending) NextID() json.RawMessage {
	return json.RawMessage(strconv.FormatInt(p.next.Add(1), 10))
}

// CancelledParams is the body of notifications/cancelled for a call.
func CancelledParams(id json.RawMessage, reason string) json.RawMessage {
	b, _ := json.Marshal(struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason,omitempty"`
	}{id, reason})
	return b
}
