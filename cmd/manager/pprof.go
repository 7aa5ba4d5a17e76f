package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
)

// warnOffLoopback says loudly when the profiles are served off loopback:
// anyone reaching the address reads the process's command line and memory
// profile, and can make it spend CPU on a profile.
func warnOffLoopback(addr string, log logr.Logger) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && (host == "localhost" || ip != nil && ip.IsLoopback()) {
		return
	}
	log.Info("WARNING: --pprof-bind-address is not a loopback address: profiles are served to anyone who reaches it, unauthenticated", "address", addr)
}

// servePprof serves Go's profiles at addr until the process ends: off
// unless --pprof-bind-address asks, on a listener of its own so that it is
// never on the agents' port nor the ops port Prometheus scrapes.
func servePprof(addr string, log logr.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	warnOffLoopback(addr, log)
	log.Info("serving profiles", "address", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "profiles not served", "address", addr)
	}
}
