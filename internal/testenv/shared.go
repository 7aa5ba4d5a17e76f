package testenv

import (
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Shared is one API server for a whole test binary, started by the first
// test that needs it; TestMain calls Stop after the tests.
type Shared struct {
	once sync.Once
	Env  *envtest.Environment
	cfg  *rest.Config
	err  error
	// Setup, when set, runs once right after the start (namespaces,
	// policies, users the binary's tests share).
	Setup func(env *envtest.Environment, cfg *rest.Config) error
}

// Start starts the API server on first use and returns its config.
func (s *Shared) Start() (*rest.Config, error) {
	s.once.Do(func() {
		s.Env, s.err = New()
		if s.err == nil {
			s.cfg, s.err = s.Env.Start()
		}
		if s.err == nil && s.Setup != nil {
			s.err = s.Setup(s.Env, s.cfg)
		}
	})
	return s.cfg, s.err
}

// Stop stops the API server if one was started.
func (s *Shared) Stop() {
	if s.Env != nil {
		_ = s.Env.Stop()
	}
}
