package credentialissuer

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
)

// AnonymousExchangeCheck is Controller.AnonymousExchange for the API server
// cfg reaches: an unauthenticated GET of the login API's group version, the
// path a client's exchange takes. kube-apiserver answers 401 before any
// authorization when its anonymous authentication is off, or limited to
// health endpoints (an AuthenticationConfiguration's anonymous.conditions,
// as EKS from 1.32 and GKE from 1.35 set it); with anonymous requests
// allowed it answers 403 or 200. A probe that cannot be made says nothing:
// only a 401 counts against the exchange.
func AnonymousExchangeCheck(cfg *rest.Config, suffix string) func(context.Context) error {
	anon := rest.AnonymousClientConfig(cfg)
	path := "/apis/" + groupsuffix.GroupVersion(groupsuffix.Login, suffix)
	return func(ctx context.Context) error {
		client, err := rest.HTTPClientFor(anon)
		if err != nil {
			return nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(anon.Host, "/")+path, nil)
		if err != nil {
			return nil
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return nil
		}
		return fmt.Errorf("the API server refuses anonymous requests to the TokenCredentialRequest API "+
			"(an unauthenticated GET of %s got HTTP 401), so clients cannot exchange a token here: it allows anonymous requests "+
			"to no path or only to health endpoints, as EKS from 1.32 and GKE from 1.35 do. Use the impersonation proxy, "+
			"whose TokenCredentialRequest stays anonymous (spec.impersonationProxy.mode: auto, or enabled where the cluster has control-plane nodes)", path)
	}
}
