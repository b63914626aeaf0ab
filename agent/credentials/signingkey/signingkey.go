// Package signingkey is the KubeClusterSigningCertificate strategy: it keeps
// the cluster's signing key (read by package kubecertagent) in memory as the
// agent's active credential source while the key can be read, and falls back to the CSR
// API while it cannot. The key rotates with the control plane, and the
// helper pod can be evicted, so it is read again periodically rather than
// once; how long to wait depends on why the last read failed.
package signingkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/version"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/credentials/kubecertagent"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
)

// Strategy keeps the cluster signing key in memory and makes it the active
// credential source while it works; otherwise exchanges fall back to the CSR API.
type Strategy struct {
	fetch func(context.Context) (*certauthority.CA, error)
	// version reads the API server's version: whether it reads a UID
	// from the certificates this strategy issues.
	version  func(context.Context) (*version.Info, error)
	enabled  bool
	sources  *clustercred.Switch
	fallback clustercred.Source
	ttl      time.Duration
	log      *slog.Logger
	// changed is called after every fetch, so the CredentialIssuer status
	// follows at once.
	changed func()
	// after is time.After, replaced in tests so the loop need not sleep.
	after func(time.Duration) <-chan time.Time

	// lastVersion is the API server's version as last read (Run's
	// goroutine only).
	lastVersion *version.Info

	mu      sync.Mutex
	lastErr error
	fetched bool
}

// New returns the strategy for agent, switching credential sources between the key's
// CA (certificates of ttl) and fallback; changed is told after every fetch.
// An agent without an image is disabled: Status says so and Run must not
// be started.
func New(agent *kubecertagent.Agent, sources *clustercred.Switch, fallback clustercred.Source, ttl time.Duration, log *slog.Logger, changed func()) *Strategy {
	serverVersion := func(ctx context.Context) (*version.Info, error) {
		// The agent's lean clientset has no discovery client: core/v1's REST
		// client asks any path.
		raw, err := agent.Kube.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
		if err != nil {
			return nil, fmt.Errorf("read /version: %w", err)
		}
		var v version.Info
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("read /version: %w", err)
		}
		return &v, nil
	}
	return &Strategy{fetch: agent.Fetch, version: serverVersion, enabled: agent.Image != "", sources: sources,
		fallback: fallback, ttl: ttl, log: log, changed: changed, after: time.After}
}

// Run fetches the key until ctx ends.
func (s *Strategy) Run(ctx context.Context) {
	for {
		fetchCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		ca, err := s.fetch(fetchCtx)
		cancel()
		s.mu.Lock()
		s.lastErr, s.fetched = err, true
		s.mu.Unlock()
		s.changed()
		select {
		case <-ctx.Done():
			return
		case <-s.after(s.apply(ctx, ca, err)):
		}
	}
}

// apply makes the outcome of one fetch the active credential source and says how long
// to wait before the next.
func (s *Strategy) apply(ctx context.Context, ca *certauthority.CA, err error) time.Duration {
	if err == nil {
		// Read with each key: the control plane may have been upgraded.
		// A failed read keeps what the last one found (an API server
		// restarting for an upgrade is the likely cause), and is tried
		// again soon; with nothing read yet, a UID is refused meanwhile.
		versionCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		v, verr := s.version(versionCtx)
		cancel()
		next := 15 * time.Minute
		dropsUID := clustercred.CertUIDUnread(v, verr)
		if verr != nil {
			next = 30 * time.Second
			if s.lastVersion != nil {
				dropsUID = clustercred.CertUIDUnread(s.lastVersion, nil)
			}
		} else {
			s.lastVersion = v
		}
		s.sources.Set(&clustercred.CA{CA: ca, TTL: s.ttl, DropsUID: dropsUID})
		s.log.Info("loaded the cluster signing key into memory")
		if dropsUID != "" {
			s.log.Info("users with a UID are refused certificates of the cluster signing key", "reason", dropsUID)
		}
		return next
	}
	s.sources.Set(s.fallback)
	s.log.Info("cluster signing key not available; using the CSR API", "reason", err.Error())
	if errors.Is(err, kubecertagent.ErrNoControllerManager) {
		return 10 * time.Minute // a managed cluster will not grow one soon
	}
	return 10 * time.Second
}

// Status is the strategy's probe: the result of the last fetch.
func (s *Strategy) Status(context.Context) (*strategy.Working, error) {
	if !s.enabled {
		return nil, errors.New("disabled: the agent was started without --kube-cert-agent-image")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fetched {
		return nil, fmt.Errorf("still fetching the key: %w", strategy.ErrPending)
	}
	return nil, s.lastErr
}
