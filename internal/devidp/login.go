package devidp

import (
	"errors"
	"html/template"
	"net/http"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// The login page is a plain HTML form (no script), so a headless browser or an HTTP client
// can sign in: GET shows it, POST checks the password and redirects to op's callback, which
// redirects to the client with the code.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in to the development identity provider</title></head>
<body>
<h1>Sign in</h1>
<p>Development identity provider: test users only.</p>
{{if .Error}}<p role="alert" id="error">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="authRequestID" value="{{.ID}}">
<label>Username <input name="username" id="username" autocomplete="username" value="{{.Username}}" required></label>
<label>Password <input name="password" id="password" type="password" autocomplete="current-password" required></label>
<button type="submit" id="submit">Sign in</button>
</form>
</body></html>
`))

type loginView struct {
	Action, ID, Username, Error string
}

func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	// The page may not be framed: a framing site could otherwise capture a password.
	w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
	view := loginView{Action: p.issuer + loginPath, ID: r.FormValue("authRequestID")}
	switch r.Method {
	case http.MethodGet:
		p.renderLogin(w, http.StatusOK, view)
	case http.MethodPost:
		view.Username = r.PostFormValue("username")
		err := p.store.completeLogin(view.ID, view.Username, r.PostFormValue("password"))
		switch {
		case errors.Is(err, errBadCredentials):
			view.Error = err.Error()
			p.renderLogin(w, http.StatusUnauthorized, view)
		case err != nil: // an unknown, expired or already answered request
			view.Error = err.Error()
			p.renderLogin(w, http.StatusBadRequest, view)
		default:
			callback := op.AuthCallbackURL(p.op)(op.ContextWithIssuer(r.Context(), p.issuer), view.ID)
			http.Redirect(w, r, callback, http.StatusFound)
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (p *Provider) renderLogin(w http.ResponseWriter, status int, view loginView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, view) // a write error means the client went away
}
