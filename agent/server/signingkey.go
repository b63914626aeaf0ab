package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pinniped-kit/pinniped/agent/controller/credentialissuer"
	"github.com/pinniped-kit/pinniped/agent/issuer"
	"github.com/pinniped-kit/pinniped/agent/kubecertagent"
)

// signingKeyStrategy keeps the cluster signing key in memory, refetching it
// periodically (it rotates with the control plane), and makes it the active
// issuer while it works; otherwise exchanges fall back to the CSR API.
type signingKeyStrategy struct {
	agent    *kubecertagent.Agent
	issuers  *issuer.Switch
	fallback issuer.Issuer
	ttl      time.Duration
	log      *slog.Logger

	// changed is called after every fetch, so the CredentialIssuer status
	// follows at once.
	changed func()

	mu      sync.Mutex
	lastErr error
	fetched bool
}

func (s *signingKeyStrategy) run(ctx context.Context) {
	for {
		fetchCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		ca, err := s.agent.Fetch(fetchCtx)
		cancel()
		s.mu.Lock()
		s.lastErr, s.fetched = err, true
		s.mu.Unlock()
		s.changed()
		wait := 15 * time.Minute
		if err != nil {
			s.issuers.Set(s.fallback)
			if errors.Is(err, kubecertagent.ErrNoControllerManager) {
				wait = 10 * time.Minute // a managed cluster will not grow one soon
			} else {
				wait = 10 * time.Second
			}
			s.log.Info("cluster signing key not available; using the CSR API", "reason", err.Error())
		} else {
			s.issuers.Set(&issuer.CA{CA: ca, TTL: s.ttl})
			s.log.Info("loaded the cluster signing key into memory")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// status is the strategy's probe: the result of the last fetch.
func (s *signingKeyStrategy) status(context.Context) (*credentialissuer.Working, error) {
	if s.agent.Image == "" {
		return nil, errors.New("disabled: the agent was started without --kube-cert-agent-image")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fetched {
		return nil, fmt.Errorf("still fetching the key: %w", credentialissuer.ErrPending)
	}
	return nil, s.lastErr
}
