package mcpbridge

import (
	"github.com/mcp-operator/mcp-operator/internal/mcpbridge/routes"
	"github.com/mcp-operator/mcp-operator/internal/redact"
)

// redactorOf is the redactor of the server named server, the shapes alone
// when it is not served.
func (b *Bridge) redactorOf(server string) *redact.Redactor {
	if s, _, ok := b.cfg.Registry.Server(server); ok {
		return b.redactor(s)
	}
	return redact.Shapes()
}

// redactor is what s's text is redacted with: its own Secret values and
// the credential shapes, or the shapes alone where none are known. Never
// nil, so no exit has a default of its own to forget.
func (b *Bridge) redactor(s *routes.Server) *redact.Redactor {
	r := redact.Shapes()
	if b.cfg.Redactor != nil {
		if own := b.cfg.Redactor(s.Namespace, s.Name); own != nil {
			r = own
		}
	}
	if b.cfg.Credentials != nil {
		// The credentials handed out for its callers too: a server may
		// echo one caller's token to another.
		r = b.cfg.Credentials.Redactor(s.Key(), r)
	}
	return r
}
