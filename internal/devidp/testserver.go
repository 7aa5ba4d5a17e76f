package devidp

import "net/http/httptest"

// NewTestServer starts a provider on a loopback port, its issuer the server's URL (http). For
// other packages' tests: close the server when done. cfg.Issuer is set here.
func NewTestServer(cfg Config) (*Provider, *httptest.Server, error) {
	srv := httptest.NewUnstartedServer(nil)
	cfg.Issuer = "http://" + srv.Listener.Addr().String()
	p, err := New(cfg)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	srv.Config.Handler = p
	srv.Start()
	return p, srv, nil
}
