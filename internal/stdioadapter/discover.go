package stdioadapter

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/mcp-operator/mcp-operator/internal/mcp/protocol"
)

// A stdio connection is one session to the server. Some servers that speak
// both protocol eras (the go-sdk's, for one) treat a server/discover as the
// start of that session and refuse a later initialize as a duplicate, yet
// keep serving session-era requests. So once the server has answered
// server/discover, a session-era client's initialize is answered by the
// adapter from that answer instead of being sent to the server.

// initializeFromDiscover builds an InitializeResult from a DiscoverResult for
// a client that asked for protocol version requested: that version if the
// server lists it, else the newest session-era version the server lists.
func initializeFromDiscover(discover []byte, requested string) ([]byte, error) {
	var d struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      json.RawMessage            `json:"capabilities"`
		ServerInfo        json.RawMessage            `json:"serverInfo"`
		Instructions      string                     `json:"instructions"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(discover, &d); err != nil {
		return nil, err
	}
	version := ""
	if requested < statelessProtocol && slices.Contains(d.SupportedVersions, requested) {
		version = requested
	} else {
		for _, v := range d.SupportedVersions {
			if v < statelessProtocol && v > version {
				version = v
			}
		}
	}
	if version == "" {
		return nil, errors.New("the server supports no session-era protocol version")
	}
	info := d.ServerInfo
	if info == nil {
		info = d.Meta[protocol.MetaServerInfo]
	}
	if d.Capabilities == nil || info == nil {
		return nil, errors.New("the server/discover result lacks capabilities or serverInfo")
	}
	return json.Marshal(struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions,omitempty"`
	}{version, d.Capabilities, info, d.Instructions})
}

// requestedVersion reads params.protocolVersion of an initialize request.
func requestedVersion(m *message) string {
	v, _ := m.stringParam("protocolVersion")
	return v
}
