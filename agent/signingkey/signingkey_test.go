package signingkey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/certauthority"
	"github.com/pinniped-kit/pinniped/agent/clustercred"
	"github.com/pinniped-kit/pinniped/agent/kubecertagent"
	"github.com/pinniped-kit/pinniped/agent/strategy"
)

// csrFallback stands for the CSR API: its credentials say where they came from.
type csrFallback struct{}

func (csrFallback) Issue(context.Context, user.Info) (*clustercred.Credential, error) {
	return &clustercred.Credential{ClusterCredential: &loginv1alpha1.ClusterCredential{Token: "from-the-csr-api"}}, nil
}

type fetchResult struct {
	ca  *certauthority.CA
	err error
}

// TestRunSwitchesIssuersAndPacesFetches: a key that can be read is the
// issuer; while it cannot, the CSR API is, and the next read comes soon
// unless the cluster has no controller manager to read it from.
func TestRunSwitchesIssuersAndPacesFetches(t *testing.T) {
	ca, err := certauthority.New("cluster signer", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan fetchResult)
	waits := make(chan time.Duration)
	wake := make(chan time.Time)
	changed := make(chan struct{}, 10)
	switcher := &clustercred.Switch{}
	s := &Strategy{
		fetch: func(context.Context) (*certauthority.CA, error) {
			r := <-results
			return r.ca, r.err
		},
		enabled: true, issuers: switcher, fallback: csrFallback{}, ttl: 5 * time.Minute,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), changed: func() { changed <- struct{}{} },
		after: func(d time.Duration) <-chan time.Time { waits <- d; return wake },
	}
	if _, err := s.Status(context.Background()); !errors.Is(err, strategy.ErrPending) {
		t.Fatalf("before the first fetch: %v, want pending", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()

	for i, c := range []struct {
		result   fetchResult
		wait     time.Duration
		fromCSR  bool
		probeErr bool
	}{
		{fetchResult{err: fmt.Errorf("find it: %w", kubecertagent.ErrNoControllerManager)}, 10 * time.Minute, true, true},
		{fetchResult{ca: ca}, 15 * time.Minute, false, false},
		{fetchResult{err: errors.New("helper pod not ready")}, 10 * time.Second, true, true},
	} {
		results <- c.result
		if got := <-waits; got != c.wait {
			t.Errorf("fetch %d: next in %v, want %v", i, got, c.wait)
		}
		<-changed
		cred, err := switcher.Issue(context.Background(), &user.DefaultInfo{Name: "alice"})
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if fromCSR := cred.Token == "from-the-csr-api"; fromCSR != c.fromCSR || (!fromCSR && cred.ClientCertificateData == "") {
			t.Errorf("fetch %d: issued %+v, want from the CSR API: %v", i, cred, c.fromCSR)
		}
		if _, err := s.Status(context.Background()); (err != nil) != c.probeErr || errors.Is(err, strategy.ErrPending) {
			t.Errorf("fetch %d: status %v", i, err)
		}
		wake <- time.Time{}
	}
	cancel()
	// The loop fetches once more before it sees ctx; let that round end.
	for {
		select {
		case results <- fetchResult{err: context.Canceled}:
		case <-waits:
		case <-done:
			return
		}
	}
}

// TestDisabledWithoutAnImage: an agent started without the helper's image
// reports the strategy disabled, saying which flag enables it.
func TestDisabledWithoutAnImage(t *testing.T) {
	s := New(&kubecertagent.Agent{}, &clustercred.Switch{}, csrFallback{}, time.Minute, slog.Default(), func() {})
	if _, err := s.Status(context.Background()); err == nil || errors.Is(err, strategy.ErrPending) ||
		err.Error() != "disabled: the agent was started without --kube-cert-agent-image" {
		t.Fatalf("status %v", err)
	}
	if s := New(&kubecertagent.Agent{Image: "img"}, &clustercred.Switch{}, csrFallback{}, time.Minute, slog.Default(), func() {}); !s.enabled {
		t.Fatal("an agent with an image is disabled")
	}
}
