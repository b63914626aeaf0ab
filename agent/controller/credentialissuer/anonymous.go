package credentialissuer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
)

// AnonymousRefusedError is AnonymousExchangeCheck's verdict that the API
// server lets no anonymous request reach the TokenCredentialRequest API.
// Any other error means the check could not tell.
type AnonymousRefusedError struct{ Path string }

func (e *AnonymousRefusedError) Error() string {
	return fmt.Sprintf(refusedPrefix+" "+
		"(an unauthenticated GET of %s got HTTP 401), so clients cannot exchange a token here: it allows anonymous requests "+
		"to no path, or only to others such as the health endpoints (as EKS from 1.32 and GKE from 1.35 do). Use the impersonation proxy, "+
		"whose TokenCredentialRequest stays anonymous (spec.impersonationProxy.mode: auto, or enabled where the cluster has control-plane nodes)", e.Path)
}

// AnonymousExchangeCheck is Controller.AnonymousExchange for the API server
// cfg reaches: an unauthenticated GET of the tokencredentialrequests
// resource, the path of a client's exchange (which POSTs there).
// kube-apiserver answers 401 before any authorization when anonymous
// authentication is off for that path (off altogether, or limited by an
// AuthenticationConfiguration's anonymous.conditions to other paths); with
// anonymous requests allowed there it authorizes system:anonymous and
// answers 403, 405 or 200. It returns nil when anonymous requests get
// through, an *AnonymousRefusedError when they do not, and any other
// error when it cannot tell (no answer, throttled, a server error).
func AnonymousExchangeCheck(cfg *rest.Config, suffix string) func(context.Context) error {
	anon := rest.AnonymousClientConfig(cfg)
	path := "/apis/" + groupsuffix.GroupVersion(groupsuffix.Login, suffix) + "/tokencredentialrequests"
	return func(ctx context.Context) error {
		client, err := rest.HTTPClientFor(anon)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(anon.Host, "/")+path, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			return &AnonymousRefusedError{Path: path}
		case resp.StatusCode < 300, resp.StatusCode == http.StatusForbidden, resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed:
			return nil
		}
		return fmt.Errorf("an unauthenticated GET of %s got HTTP %d", path, resp.StatusCode)
	}
}

// anonymousVerdict runs the check and keeps its last verdict when it
// cannot tell, so that a passing failure (throttling, an API server
// restarting) neither sends clients to a refused exchange nor takes them
// off a working one. With no verdict yet (a new leader), the status the
// last leader wrote stands in for one; known says whether the check
// itself has told this controller.
func (c *Controller) anonymousVerdict(ctx context.Context, written func() []configv1alpha1.CredentialIssuerStrategy) (known bool, refused error) {
	if c.AnonymousExchange == nil {
		return true, nil
	}
	anonCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := c.AnonymousExchange(anonCtx)
	cancel()
	c.anonymous.Lock()
	defer c.anonymous.Unlock()
	var r *AnonymousRefusedError
	switch {
	case err == nil:
		c.anonymous.refused, c.anonymous.known = nil, true
	case errors.As(err, &r):
		c.anonymous.refused, c.anonymous.known = err, true
	default:
		c.Log.Info("could not tell whether anonymous requests reach the TokenCredentialRequest API; keeping the last verdict", "error", err)
		if !c.anonymous.known {
			for _, s := range written() {
				if s.Reason == configv1alpha1.ErrorDuringSetupStrategyReason && strings.HasPrefix(s.Message, refusedPrefix) {
					return false, errors.New(s.Message)
				}
			}
		}
	}
	return c.anonymous.known, c.anonymous.refused
}

// refusedPrefix opens every AnonymousRefusedError's text.
const refusedPrefix = "the API server refuses anonymous requests to the TokenCredentialRequest API"
