package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// page is what the layout shows around a page's own part (Data).
type page struct {
	Title string
	// Nav is the navigation entry of this page; Live the topic whose
	// changes refresh it (empty: not live).
	Nav, Live string
	CSRF      string
	Person    *Person
	Flash     []flash
	Data      any
}

// pages are the templates, one set per page: each page's file defines
// "main", shown inside the layout. html/template escapes every value by
// its context, so a tool's name, description or arguments are text, never
// markup, and never a URL scheme in an attribute.
type pages struct {
	sets map[string]*template.Template
}

var pageNames = []string{"approvals", "servers", "server", "policies", "activity", "signedin", "signedout", "refused"}

var funcs = template.FuncMap{
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return duration.HumanDuration(now.Sub(t))
	},
	"left": func(now, t time.Time) string {
		if d := t.Sub(now); d > 0 {
			return duration.HumanDuration(d)
		}
		return "expired"
	},
	"pathEscape": url.PathEscape,
	"join":       strings.Join,
}

func parsePages() (*pages, error) {
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p.sets[name] = t
	}
	return p, nil
}

// render writes a page whole or not at all: a template error is a 500
// with nothing half-written.
func (s *Server) render(w http.ResponseWriter, _ *http.Request, status int, name string, p page) {
	var buf bytes.Buffer
	if err := s.pages.sets[name].Execute(&buf, p); err != nil {
		s.opts.Log.Error(err, "console: while rendering", "page", name)
		http.Error(w, "the page could not be shown", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// refuse answers with a page that says why nothing happened.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	p := page{Title: "Refused", Data: why}
	if x := s.sessionOf(r); x != nil {
		p.Person, p.CSRF = &x.person, x.csrf
	}
	s.render(w, r, status, "refused", p)
}

// page serves a page that needs a session. Without one, the person is
// offered to sign in (a same-site link, so a session cookie the browser
// holds is sent with it even when this request came from another site).
func (s *Server) page(h func(r *http.Request, x *session) (string, page, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := s.sessionOf(r)
		if x == nil {
			s.render(w, r, http.StatusUnauthorized, "signedout", page{Title: "Sign in", Data: r.URL.RequestURI()})
			return
		}
		name, p, err := h(r, x)
		if err != nil {
			p = page{Title: "Error", Data: err.Error()}
			name = "refused"
		}
		p.Person, p.CSRF = &x.person, x.csrf
		if r.Header.Get(refreshHeader) == "" {
			// A live refresh re-reads the page; the messages stay for the
			// page the person looks at.
			p.Flash = x.takeFlash()
		}
		status := http.StatusOK
		if err != nil {
			status = statusOf(err)
		}
		s.render(w, r, status, name, p)
	})
}

// pageError is an error a page shows with its status.
type pageError struct {
	status int
	msg    string
}

func (e *pageError) Error() string { return e.msg }

func statusOf(err error) int {
	if pe, ok := err.(*pageError); ok {
		return pe.status
	}
	return http.StatusInternalServerError
}
