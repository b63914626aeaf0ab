// Package credentialissuer keeps the CredentialIssuer status true: which
// credential strategies work on this cluster, and which frontend clients
// (`pinniped get kubeconfig`) should use.
package credentialissuer

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/credentials/strategy"
)

// Controller probes strategies and writes the status. Only the leader runs it.
type Controller struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	Rest    *rest.Config
	Name    string
	Probers []strategy.Prober
	// Log and Now, the logger and the clock, are required: set once where
	// it is built (the agent's server; a test's own).
	Log      *slog.Logger
	Now      func() time.Time
	Interval time.Duration // between probes once everything works
	// Trigger, when it fires, makes the controller probe again at once.
	Trigger <-chan struct{}
	// GroupSuffix is the agent's API group suffix; empty means the default.
	GroupSuffix string
	// AnonymousExchange says whether clients without a credential can reach
	// the TokenCredentialRequest API through the API server (nil: not
	// checked; see AnonymousExchangeCheck). Where they cannot, a strategy
	// whose only frontend is that API is of no use to them.
	AnonymousExchange func(context.Context) error

	// anonymous is the last verdict of AnonymousExchange that said
	// something. A controller may sync from two goroutines across
	// leadership terms.
	anonymous struct {
		sync.Mutex
		refused error // an *AnonymousRefusedError, or nil
		known   bool
	}
}

// Run probes and writes status until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	for {
		r := c.SyncOnce(ctx)
		wait := c.Interval
		if wait == 0 {
			wait = 10 * time.Minute
		}
		switch {
		case r.Pending:
			// Something is about to work (a load balancer address, a key
			// being fetched): clients wait for it, so look again soon.
			wait = 3 * time.Second
		case !r.AnyWorking:
			wait = 30 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-c.Trigger:
		case <-time.After(wait):
		}
	}
}

// SyncResult summarises one round of probes.
type SyncResult struct {
	AnyWorking bool // at least one strategy can issue credentials (to someone)
	Pending    bool // at least one strategy is still being set up
}

// SyncOnce probes every strategy and writes the status.
func (c *Controller) SyncOnce(ctx context.Context) SyncResult {
	now := metav1.NewTime(c.Now().UTC())
	server, ca := c.frontendInfo(ctx)
	var r SyncResult
	known, anonErr := c.anonymousVerdict(ctx, func() []configv1alpha1.CredentialIssuerStrategy { return c.writtenStrategies(ctx) })
	if !known {
		// Look again soon: a verdict is needed before the status can be
		// trusted either way.
		r.Pending = true
	}
	var strategies []configv1alpha1.CredentialIssuerStrategy
	for _, p := range c.Probers {
		probeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		working, err := p.Probe(probeCtx)
		cancel()
		s := configv1alpha1.CredentialIssuerStrategy{Type: p.Type, LastUpdateTime: now}
		switch {
		case errors.Is(err, strategy.ErrPending):
			r.Pending = true
			s.Status, s.Reason, s.Message = configv1alpha1.ErrorStrategyStatus, configv1alpha1.PendingStrategyReason, err.Error()
		case err != nil:
			s.Status, s.Reason = configv1alpha1.ErrorStrategyStatus, p.Failure
			s.Message = err.Error()
			var re *strategy.ReasonError
			if errors.As(err, &re) {
				s.Reason = re.Reason
			} else if p.Hint != "" {
				s.Message += ". " + p.Hint
			}
		case working != nil:
			r.AnyWorking = true
			s.Status, s.Reason = configv1alpha1.SuccessStrategyStatus, p.Success
			s.Message, s.Frontend = working.Message, working.Frontend
		case anonErr != nil:
			// It issues, but nobody without a credential can ask it to:
			// saying Success would send clients (ours and upstream's) to an
			// exchange that answers 401, instead of to the proxy. It still
			// counts as working for how often to look again: nothing here
			// is about to change.
			r.AnyWorking = true
			s.Status, s.Reason, s.Message = configv1alpha1.ErrorStrategyStatus, configv1alpha1.ErrorDuringSetupStrategyReason, anonErr.Error()
		default:
			r.AnyWorking = true
			s.Status, s.Reason = configv1alpha1.SuccessStrategyStatus, p.Success
			s.Message = "certificates are being issued"
			s.Frontend = &configv1alpha1.CredentialIssuerFrontend{
				Type: configv1alpha1.TokenCredentialRequestAPIFrontendType,
				TokenCredentialRequestAPIInfo: &configv1alpha1.TokenCredentialRequestAPIInfo{
					Server: server, CertificateAuthorityData: ca,
				},
			}
		}
		strategies = append(strategies, s)
	}
	if err := c.writeStatus(ctx, strategies); err != nil {
		c.Log.Error("could not update CredentialIssuer status", "name", c.Name, "error", err)
		return SyncResult{}
	}
	return r
}

// writtenStrategies is the status the CredentialIssuer holds now (nil if
// it cannot be read).
func (c *Controller) writtenStrategies(ctx context.Context) []configv1alpha1.CredentialIssuerStrategy {
	if c.AnonymousExchange == nil {
		return nil
	}
	u, err := c.Dynamic.Resource(strategy.Resource(c.GroupSuffix)).Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var ci configv1alpha1.CredentialIssuer
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ci) != nil {
		return nil
	}
	return ci.Status.Strategies
}

func (c *Controller) writeStatus(ctx context.Context, strategies []configv1alpha1.CredentialIssuerStrategy) error {
	res := c.Dynamic.Resource(strategy.Resource(c.GroupSuffix))
	u, err := res.Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// `pinniped install` creates it; recreate it if an admin deleted it,
		// since clients cannot find the agent without it.
		ci := &configv1alpha1.CredentialIssuer{
			TypeMeta:   metav1.TypeMeta{APIVersion: groupsuffix.GroupVersion(groupsuffix.Config, c.GroupSuffix), Kind: "CredentialIssuer"},
			ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: map[string]string{"app.kubernetes.io/part-of": "pinniped"}},
		}
		m, convErr := runtime.DefaultUnstructuredConverter.ToUnstructured(ci)
		if convErr != nil {
			return convErr
		}
		u, err = res.Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	var ci configv1alpha1.CredentialIssuer
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ci); err != nil {
		return err
	}
	ci.Status.Strategies = strategies
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ci)
	if err != nil {
		return err
	}
	_, err = res.UpdateStatus(ctx, &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{})
	return err
}

// frontendInfo is where clients reach the cluster: kube-public/cluster-info
// when the cluster publishes it (kubeadm does), else the agent's own view.
func (c *Controller) frontendInfo(ctx context.Context) (server, caB64 string) {
	if cm, err := c.Kube.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{}); err == nil {
		if cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"])); err == nil {
			for _, cluster := range cfg.Clusters {
				if cluster.Server != "" && len(cluster.CertificateAuthorityData) > 0 {
					return cluster.Server, base64.StdEncoding.EncodeToString(cluster.CertificateAuthorityData)
				}
			}
		}
	}
	ca := c.Rest.CAData
	if len(ca) == 0 && c.Rest.CAFile != "" {
		if b, err := readFile(c.Rest.CAFile); err == nil {
			ca = b
		}
	}
	return c.Rest.Host, base64.StdEncoding.EncodeToString(ca)
}
