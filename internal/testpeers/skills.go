package testpeers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	"github.com/mcp-operator/mcp-operator/internal/mcp/jsonrpc"
	"github.com/mcp-operator/mcp-operator/internal/testkit"
)

// SkillsServer is an MCP server that serves skills as the skills extension
// (io.modelcontextprotocol/skills) defines them: skills/list and skills/get
// answer entries with each file's sha256 and size, resources/read serves
// the files. Neither Go SDK in this module serves the extension and no
// published server here does either, so the tests use this one. It answers
// the session-era handshake over Streamable HTTP with plain JSON responses
// on loopback.
//
// Tests change a skill with SetFile (entry and content change together, as
// a real update does) or make one lie with Tamper (the content changes but
// the entry keeps the old digest, as a corrupted or tampered server does).
type SkillsServer struct {
	URL string

	mu     sync.Mutex
	skills map[string]*peerSkill // by skill path
	srv    *httptest.Server
}

type peerSkill struct {
	description string
	files       map[string]string // content by path within the skill
	listed      map[string]string // content the entry describes, by path, when it lies
}

// StartSkillsServer serves skills (skill path -> description) whose only
// file is a SKILL.md naming them; add files with SetFile.
func StartSkillsServer(t testkit.TB, skills map[string]string) *SkillsServer {
	s := &SkillsServer{skills: map[string]*peerSkill{}}
	for path, desc := range skills {
		name := path[strings.LastIndex(path, "/")+1:]
		s.skills[path] = &peerSkill{description: desc, listed: map[string]string{}, files: map[string]string{
			"SKILL.md": fmt.Sprintf("---\nname: %s\ndescription: %s\n---\n\nSteps of %s.\n", name, desc, name),
		}}
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/mcp"
	t.Cleanup(s.srv.Close)
	return s
}

// Close stops the server: calls to it then fail to connect.
func (s *SkillsServer) Close() { s.srv.Close() }

// SetFile sets (adds or changes) a file of a skill, entry and content.
func (s *SkillsServer) SetFile(skill, path, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skills[skill].files[path] = content
	delete(s.skills[skill].listed, path)
}

// Tamper changes a file's content but not the digest and size its entry
// states.
func (s *SkillsServer) Tamper(skill, path, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sk := s.skills[skill]
	if _, lying := sk.listed[path]; !lying {
		sk.listed[path] = sk.files[path]
	}
	sk.files[path] = content
}

// Digest is sha256:<hex> of content, as skill entries state it.
func Digest(content string) string {
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (s *SkillsServer) entry(path string) map[string]any {
	sk := s.skills[path]
	name := path[strings.LastIndex(path, "/")+1:]
	files := make([]string, 0, len(sk.files))
	for f := range sk.files {
		files = append(files, f)
	}
	slices.Sort(files)
	resources := []map[string]any{}
	for _, f := range files {
		described, lying := sk.listed[f]
		if !lying {
			described = sk.files[f]
		}
		resources = append(resources, map[string]any{"uri": "skill://" + path + "/" + f, "digest": Digest(described), "size": len(described)})
	}
	return map[string]any{
		"uri":         "skill://" + path + "/SKILL.md",
		"frontmatter": map[string]any{"name": name, "description": sk.description},
		"resources":   resources,
	}
}

// file finds the skill file of uri.
func (s *SkillsServer) file(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, "skill://")
	if !ok {
		return "", false
	}
	for path, sk := range s.skills {
		if f, ok := strings.CutPrefix(rest, path+"/"); ok {
			content, ok := sk.files[f]
			return content, ok
		}
	}
	return "", false
}

func (s *SkillsServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			URI             string `json:"uri"`
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	if req.ID == nil { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.mu.Lock()
	result, rpcErr := s.answer(req.Method, req.Params.URI, req.Params.ProtocolVersion)
	s.mu.Unlock()
	msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	if rpcErr != nil {
		msg["error"] = rpcErr
	} else {
		msg["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(msg)
}

func (s *SkillsServer) answer(method, uri, version string) (any, map[string]any) {
	switch method {
	case "initialize":
		return map[string]any{
			"protocolVersion": version,
			"serverInfo":      map[string]any{"name": "skills-peer", "version": "1.0.0"},
			"capabilities": map[string]any{
				"resources":  map[string]any{},
				"extensions": map[string]any{"io.modelcontextprotocol/skills": map[string]any{}},
			},
		}, nil
	case "ping":
		return map[string]any{}, nil
	case "resources/list":
		return map[string]any{"resources": []any{}}, nil
	case "skills/list":
		paths := make([]string, 0, len(s.skills))
		for p := range s.skills {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		entries := []any{}
		for _, p := range paths {
			entries = append(entries, s.entry(p))
		}
		return map[string]any{"resultType": "complete", "skills": entries, "ttlMs": 0, "cacheScope": "public"}, nil
	case "skills/get":
		path, ok := strings.CutSuffix(strings.TrimPrefix(uri, "skill://"), "/SKILL.md")
		if _, known := s.skills[path]; !ok || !known {
			return nil, map[string]any{"code": jsonrpc.CodeInvalidParams, "message": "no such skill: " + uri}
		}
		return map[string]any{"resultType": "complete", "skill": s.entry(path), "ttlMs": 0, "cacheScope": "public"}, nil
	case "resources/read":
		content, ok := s.file(uri)
		if !ok {
			return nil, map[string]any{"code": jsonrpc.CodeInvalidParams, "message": "no such resource: " + uri}
		}
		return map[string]any{"contents": []any{map[string]any{"uri": uri, "mimeType": "text/markdown", "text": content}}}, nil
	}
	return nil, map[string]any{"code": jsonrpc.CodeMethodNotFound, "message": "method not found: " + method}
}
