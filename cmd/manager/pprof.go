package main

import (
	"errors"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
)

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
	log.Info("serving profiles", "address", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error(err, "profiles not served", "address", addr)
	}
}
