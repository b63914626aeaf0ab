// Package requestheader authenticates requests that the kube-apiserver's
// aggregation layer forwards to the agent: the client certificate must chain
// to the requestheader CA and carry an allowed name, and the user is read
// from the X-Remote-* headers. The checks are k8s.io/apiserver's code; this
// package wires it to the kube-system/extension-apiserver-authentication
// ConfigMap, which the kube-apiserver keeps current, and reloads on change.
package requestheader

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/lru"
)

// The ConfigMap kube-apiserver publishes for extension API servers.
const (
	ConfigMapNamespace = "kube-system"
	ConfigMapName      = "extension-apiserver-authentication"
)

// Source is the live front-proxy configuration.
type Source struct {
	// Authenticator verifies the front proxy and extracts the user.
	Authenticator authenticator.Request
}

// NewSource starts watching the ConfigMap for as long as ctx lives, and
// waits up to wait for a usable configuration, so the agent refuses to serve
// without one instead of answering 401 to everyone.
func NewSource(ctx context.Context, client kubernetes.Interface, waitFor time.Duration) (*Source, error) {
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("requestheader-client-ca",
		ConfigMapNamespace, ConfigMapName, "requestheader-client-ca-file", client)
	if err != nil {
		return nil, err
	}
	headers := headerrequest.NewRequestHeaderAuthRequestController(ConfigMapName, ConfigMapNamespace, client,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	if err := headers.RunOnce(ctx); err != nil {
		return nil, fmt.Errorf("read requestheader settings from %s/%s (is the aggregation layer enabled on kube-apiserver?): %w",
			ConfigMapNamespace, ConfigMapName, err)
	}
	go ca.Run(ctx, 1)
	go headers.Run(ctx, 1)

	// The CA controller only learns the bundle once its informer has synced.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return len(ca.CurrentCABundleContent()) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s/%s has no usable requestheader-client-ca-file after %v: enable the aggregation layer (--requestheader-client-ca-file) on kube-apiserver",
			ConfigMapNamespace, ConfigMapName, waitFor)
	}
	return &Source{
		Authenticator: &verifiedProxy{
			verifyOptions: ca.VerifyOptions,
			caBundle:      ca.CurrentCABundleContent,
			allowedNames:  headers.AllowedClientNames,
			headers: headerrequest.NewDynamic(
				headerrequest.StringSliceProviderFunc(headers.UsernameHeaders),
				headerrequest.StringSliceProviderFunc(headers.UIDHeaders),
				headerrequest.StringSliceProviderFunc(headers.GroupHeaders),
				headerrequest.StringSliceProviderFunc(headers.ExtraHeaderPrefixes)),
			now: time.Now,
			lru: lru.New(verifiedCacheSize),
		},
	}, nil
}

// Middleware admits only requests that authenticate as coming from the
// front proxy, and puts the forwarded user in the request context.
// Authorization already happened in kube-apiserver before it proxied the
// request, so it is not repeated here.
func Middleware(auth authenticator.Request, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := auth.AuthenticateRequest(r)
		if err != nil || !ok {
			if err != nil {
				log.Info("refused a request that did not come from the kube-apiserver front proxy",
					"remote", r.RemoteAddr, "path", r.URL.Path, "error", err)
			}
			writeUnauthorized(w)
			return
		}
		next.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), resp.User)))
	})
}

func writeUnauthorized(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":401,"message":"this API is served only through the Kubernetes API server"}`+"\n",
		metav1.StatusReasonUnauthorized)
}
