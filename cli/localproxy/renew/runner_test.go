package renew

import (
	"context"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/ui/plain"
)

// TestRenewsThroughTheRunner wires the Renewer to the login runner and its
// file cache as pinniped proxy does (Skew = Ask.MinValid, Unattended =
// !Ask.Person): every renewal is a fresh exchange, never the cached
// credential handed back, and kubectl's engine finds each new one.
func TestRenewsThroughTheRunner(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	exchanges := 0
	engine := func() *login.Runner {
		return &login.Runner{
			Store: &filestore.Store{Dir: dir + "/creds"}, LockDir: dir + "/locks", Now: clk.now, UI: &plain.Login{Err: io.Discard},
			Exchange: func(context.Context, *config.Concierge, string) (*loginv1alpha1.ClusterCredential, error) {
				exchanges++
				return &loginv1alpha1.ClusterCredential{Token: "cluster-token", ExpirationTimestamp: metav1.NewTime(clk.now().Add(5 * time.Minute))}, nil
			},
		}
	}
	static := &config.Static{Token: "static", Concierge: &config.Concierge{Endpoint: "https://agent", AuthenticatorType: "webhook", AuthenticatorName: "w"}}
	cluster := login.Request{Cluster: config.Cluster{Server: "https://cluster.example"}}
	proxy := engine()
	var applied []time.Time
	r := &Renewer{
		Get: func(ctx context.Context, a Ask) (*credcache.Credential, error) {
			req := cluster
			req.MinValid, req.Unattended = a.MinValid, !a.Person
			return proxy.CredentialStatic(ctx, static, req)
		},
		Apply: func(c *credcache.Credential) error { applied = append(applied, c.ExpirationTimestamp); return nil },
		Now:   clk.now, After: clk.after, WakeCheck: 1 << 62,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { clk.stop(); cancel(); <-done }()

	for i := range 4 {
		w := clk.next(t)
		if w.d != 200*time.Second || exchanges != i+1 {
			t.Fatalf("renewal %d: waits %v with %d exchanges; want 200s and %d", i, w.d, exchanges, i+1)
		}
		// kubectl, meanwhile, gets the proxy's credential from the cache.
		cred, err := engine().CredentialStatic(ctx, static, cluster)
		if err != nil || !cred.ExpirationTimestamp.Equal(applied[i]) || exchanges != i+1 {
			t.Fatalf("kubectl: %v, %v (applied %v), %d exchanges", cred, err, applied[i], exchanges)
		}
		clk.elapse(w)
	}
}
