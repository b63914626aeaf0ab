package signingkey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/credentials/kubecertagent"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
	"github.com/pinniped-kit/pinniped/agent/plumbing/kubeclient"
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

// TestRunSwitchesSourcesAndPacesFetches: a key that can be read is the
// credential source; while it cannot, the CSR API is, and the next read comes soon
// unless the cluster has no controller manager to read it from.
func TestRunSwitchesSourcesAndPacesFetches(t *testing.T) {
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
		version: func(context.Context) (*version.Info, error) {
			return &version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}, nil
		},
		enabled: true, sources: switcher, fallback: csrFallback{}, ttl: 5 * time.Minute,
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

// On a cluster whose API server reads no UID from client certificates
// (before 1.33), the signing key's certificates are refused to a user with
// a UID, who would otherwise arrive without it; others still get them.
func TestOldClusterRefusesUIDCertificates(t *testing.T) {
	ca, err := certauthority.New("cluster signer", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v       *version.Info
		err     error
		refused bool
	}{
		{v: &version.Info{Major: "1", Minor: "32", GitVersion: "v1.32.13"}, refused: true},
		{v: &version.Info{Major: "1", Minor: "32+", GitVersion: "v1.32.9-eks-1"}, refused: true},
		{v: &version.Info{Major: "1", Minor: "33", GitVersion: "v1.33.13"}},
		{v: &version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}},
		{err: errors.New("connection refused"), refused: true},
		{v: &version.Info{Major: "", Minor: ""}, refused: true},
		{v: &version.Info{Major: "1", Minor: "34", EmulationMajor: "1", EmulationMinor: "32", GitVersion: "v1.34.4"}, refused: true},
		{v: &version.Info{Major: "1", Minor: "35", EmulationMajor: "1", EmulationMinor: "34", GitVersion: "v1.35.4"}},
	} {
		switcher := &clustercred.Switch{}
		s := &Strategy{version: func(context.Context) (*version.Info, error) { return c.v, c.err }, sources: switcher, fallback: csrFallback{},
			ttl: time.Minute, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		s.apply(context.Background(), ca, nil)
		if _, err := switcher.Issue(context.Background(), &user.DefaultInfo{Name: "alice"}); err != nil {
			t.Errorf("%+v %v: alice without a UID refused: %v", c.v, c.err, err)
		}
		_, err := switcher.Issue(context.Background(), &user.DefaultInfo{Name: "alice", UID: "4711"})
		if (err != nil) != c.refused {
			t.Errorf("%+v %v: alice with a UID: %v, want refused %v", c.v, c.err, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "claimMappings.uid") {
			t.Errorf("refusal does not say what to change: %v", err)
		}
	}
}

// The strategy reads the version through the agent's own lean clientset,
// which has no discovery client.
func TestVersionIsReadThroughTheAgentsClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"major":"1","minor":"32","gitVersion":"v1.32.13"}`))
	}))
	defer srv.Close()
	kube, err := kubeclient.New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	s := New(&kubecertagent.Agent{Kube: kube}, &clustercred.Switch{}, csrFallback{}, time.Minute, slog.Default(), func() {})
	v, err := s.version(context.Background())
	if err != nil || v.GitVersion != "v1.32.13" || v.Minor != "32" {
		t.Fatalf("version %+v, %v", v, err)
	}
}

// A failed read of the version keeps what the last one found, and is
// retried soon; with nothing read yet, a UID is refused.
func TestVersionReadFailureKeepsTheLastOne(t *testing.T) {
	ca, err := certauthority.New("cluster signer", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	var answer *version.Info
	switcher := &clustercred.Switch{}
	s := &Strategy{version: func(context.Context) (*version.Info, error) {
		if answer == nil {
			return nil, errors.New("connection refused")
		}
		return answer, nil
	}, sources: switcher, fallback: csrFallback{}, ttl: time.Minute, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	withUID := &user.DefaultInfo{Name: "alice", UID: "4711"}
	for i, c := range []struct {
		answer  *version.Info
		wait    time.Duration
		refused bool
	}{
		{nil, 30 * time.Second, true},
		{&version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}, 15 * time.Minute, false},
		{nil, 30 * time.Second, false},
		{&version.Info{Major: "1", Minor: "32", GitVersion: "v1.32.13"}, 15 * time.Minute, true},
		{nil, 30 * time.Second, true},
	} {
		answer = c.answer
		if got := s.apply(context.Background(), ca, nil); got != c.wait {
			t.Errorf("load %d: next in %v, want %v", i, got, c.wait)
		}
		if _, err := switcher.Issue(context.Background(), withUID); (err != nil) != c.refused {
			t.Errorf("load %d: %v, want refused %v", i, err, c.refused)
		}
	}
}
