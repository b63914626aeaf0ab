package doctor

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/cli/httpclient"
	"github.com/pinniped-kit/pinniped/cli/login/agentclient"
)

const needsLogin = "not logged in: run `kubectl get ns` (or `pinniped login ...`) to log in first"

func (s *agentFacts) noAgent() string {
	if s.kind == "" {
		return needsArgs
	}
	return "the login does not use the agent (no --enable-concierge): the cluster checks the token itself"
}

func checkAgentAPI(ctx context.Context, s *agentFacts) Result {
	c := s.conc
	if c == nil {
		return skip("%s", s.noAgent())
	}
	if s.clusterSilent && s.anon != nil && sameServer(c.Endpoint, s.anon.Host) {
		// Only silence is certain to repeat: the agent's endpoint has its
		// own CA bundle, which may be trusted where the kubeconfig's is not.
		return skip("the agent's endpoint is the cluster's server, which did not answer (cluster.api)")
	}
	client, err := s.d.f.HTTPClient(c.CABundle, 0)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("--concierge-ca-bundle-data is unusable (%v): %s", err, regenerate))
	}
	a, err := agentclient.Probe(ctx, client, c)
	if err != nil {
		if notTLS(err) {
			return fail(err.Error(), fmt.Sprintf("the agent's endpoint %s does not speak TLS at that address (%v): fix --concierge-endpoint (its https port) in the exec entry, or %s", c.Endpoint, err, regenerate))
		}
		if isTLSTrust(err) {
			return fail(err.Error(), fmt.Sprintf("the agent's endpoint %s presents a certificate that --concierge-ca-bundle-data does not trust (%v): %s", c.Endpoint, err, regenerate))
		}
		return fail(err.Error(), fmt.Sprintf("the agent's endpoint %s does not answer (%v): check --concierge-endpoint, the network and any proxy", c.Endpoint, err))
	}
	group := groupsuffix.Group(groupsuffix.Login, c.Suffix())
	switch {
	case a.Refused:
		return ok("the TokenCredentialRequest API answers at %s (it refused a junk token, as it should)", c.Endpoint)
	case a.Credential:
		return fail("a credential for a junk token", fmt.Sprintf("the agent at %s issued a credential for a junk token, so its authenticator accepts anything: tell your administrator now", c.Endpoint))
	case a.Status == http.StatusNotFound:
		return fail(a.Message, fmt.Sprintf("the API group %s is not served at %s (HTTP 404): install the agent (`pinniped install`), or fix --concierge-api-group-suffix (%s) or --concierge-endpoint in the exec entry", group, c.Endpoint, c.Suffix()))
	case a.Status == http.StatusServiceUnavailable:
		return fail(a.Message, fmt.Sprintf("the APIService %s is registered but not available (HTTP 503): ask your administrator to check the agent's pods", groupsuffix.APIServiceName(groupsuffix.Login, c.Suffix())))
	case a.Status == http.StatusCreated:
		return warn("an answer without a refusal or a credential", fmt.Sprintf("the agent at %s answered a junk token with neither a refusal nor a credential: ask your administrator which version of the agent runs there", c.Endpoint))
	case a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden:
		return fail(a.Message, fmt.Sprintf("%s refuses an anonymous TokenCredentialRequest (HTTP %d), and logins send one: ask your administrator to allow anonymous requests to %s (or use the agent's impersonation proxy)", c.Endpoint, a.Status, group))
	}
	return warn(fmt.Sprintf("HTTP %d: %s", a.Status, a.Message), fmt.Sprintf("the agent's endpoint %s answered HTTP %d (%s): ask your administrator to check the agent", c.Endpoint, a.Status, a.Message))
}

// kube is a cluster client with the login's credential: the cached one, or
// the kubeconfig's own when it starts no login. nil, and why, when there
// is none or it must not be sent (cluster.api found the connection
// unverified, or the server unreachable).
func (s *agentFacts) kube() (dynamic.Interface, string) {
	if why := s.clusterUnusable(); why != "" {
		return nil, why
	}
	var cfg *rest.Config
	switch {
	case s.cred != nil && s.anon != nil:
		cfg = rest.CopyConfig(s.anon)
		if s.cred.ClientCertificateData != "" {
			cfg.CertData, cfg.KeyData = []byte(s.cred.ClientCertificateData), []byte(s.cred.ClientKeyData)
		} else {
			cfg.BearerToken = s.cred.Token
		}
	case s.full != nil:
		cfg = s.full
	default:
		return nil, needsLogin
	}
	// cluster.api has said why already; this holds the rule for the
	// config the credential actually goes out with.
	if why, _ := unverified(cfg); why != "" {
		return nil, "the kubeconfig's cluster " + why + ", so no credential is sent to it (cluster.api)"
	}
	dyn, err := s.d.f.DynamicFor(cfg)
	if err != nil {
		return nil, fmt.Sprintf("no cluster client: %v", err)
	}
	return dyn, ""
}

// clusterUnusable says why nothing more is asked of the cluster ("" when
// it may be): a credential is never sent over a connection whose server
// is not verified, and a server that did not answer would only cost each
// check its timeout again.
func (s *agentFacts) clusterUnusable() string {
	switch {
	case s.clusterUnsafe != "":
		return s.clusterUnsafe
	case s.clusterSilent:
		return "the API server could not be reached (cluster.api)"
	case s.clusterDown:
		return "the API server's TLS connection could not be used (cluster.api)"
	}
	return ""
}

// agentClient reads the agent's objects: with --admin-kubeconfig's
// credential when given (users may not read APIServices, CredentialIssuers
// or authenticators), else with the login's. When it cannot, the Result
// says why (a SKIP, or a FAIL for an --admin-kubeconfig of another
// cluster).
func (s *agentFacts) agentClient(ctx context.Context) (dynamic.Interface, Result, bool) {
	if s.conc == nil {
		return nil, skip("%s", s.noAgent()), false
	}
	if s.d.Admin != nil {
		if s.anon == nil {
			return nil, skip("needs the context (kubeconfig.context)"), false
		}
		if s.clusterDown && sameServer(s.d.Admin.Host, s.anon.Host) {
			return nil, skip("%s", s.clusterUnusable()), false
		}
		// The rule the login's credential keeps holds for an
		// administrator's too, which is worth more.
		if why, fix := unverified(s.d.Admin); why != "" {
			return nil, skip("--admin-kubeconfig's current context %s, so doctor does not send its credential: %s", why, fix), false
		}
		dyn, err := s.d.f.DynamicFor(s.d.Admin)
		if err != nil {
			return nil, skip("no cluster client for --admin-kubeconfig: %v", err), false
		}
		if res, same := s.adminSameCluster(ctx, dyn); !same {
			return nil, res, false
		}
		return dyn, Result{}, true
	}
	dyn, why := s.kube()
	if dyn == nil {
		return nil, skip("%s", why), false
	}
	return dyn, Result{}, true
}

// serverURL is the URL client-go reaches cfg's server at. A server
// without a scheme is https to client-go only when cfg has a CA, a client
// certificate or insecure-skip-tls-verify, and plain http otherwise, so
// the scheme is taken from client-go itself rather than from cfg.Host.
func serverURL(cfg *rest.Config) (*url.URL, error) {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	return u, err
}

// unverified says how a connection made with cfg leaves the server
// unverified, and what to change ("" when it does not): the one rule for
// sending a credential, the login's or --admin-kubeconfig's. Only https
// that checks the server's certificate is allowed.
func unverified(cfg *rest.Config) (why, fix string) {
	u, err := serverURL(cfg)
	if err != nil {
		return fmt.Sprintf("names no usable server (%v)", err), "set its cluster's server to the https:// address"
	}
	if !strings.EqualFold(u.Scheme, "https") {
		return fmt.Sprintf("names no https:// server (%s, which client-go reaches as %s://%s)", cfg.Host, u.Scheme, u.Host), "set its cluster's server to the https:// address"
	}
	if cfg.Insecure {
		return "turns off certificate checks (insecure-skip-tls-verify)", "remove insecure-skip-tls-verify from its cluster, and set certificate-authority-data if the server's certificate is not publicly trusted"
	}
	return "", ""
}

// adminSameCluster checks, once, that --admin-kubeconfig reaches this
// context's cluster, so that its answers are about the agent this login
// uses: the same server, or one its agent advertises (a kubeconfig made
// for the impersonation proxy names the proxy, not the API server).
func (s *agentFacts) adminSameCluster(ctx context.Context, dyn dynamic.Interface) (Result, bool) {
	if s.adminChecked {
		return s.adminResult, s.adminResult.Status == ""
	}
	s.adminChecked = true
	if sameServer(s.d.Admin.Host, s.anon.Host) {
		return Result{}, true
	}
	endpoints, err := s.advertised(ctx, dyn)
	for _, e := range endpoints {
		if sameServer(e, s.anon.Host) {
			return Result{}, true
		}
	}
	// Its answers would be about another cluster's agent.
	why := fmt.Sprintf("its agent does not advertise this context's server %s", s.anon.Host)
	if err != nil {
		why = fmt.Sprintf("its agent's CredentialIssuers cannot be read (%v) to tell whether it serves this context's server %s", err, s.anon.Host)
	}
	s.adminResult = fail("--admin-kubeconfig: "+s.d.Admin.Host, fmt.Sprintf("--admin-kubeconfig's current context is the cluster at %s, and %s: switch it to this cluster's context (kubectl config use-context), or pass the right file", s.d.Admin.Host, why))
	return s.adminResult, false
}

// advertised are the endpoints the CredentialIssuers read with dyn
// advertise (impersonation proxies, TokenCredentialRequest servers).
func (s *agentFacts) advertised(ctx context.Context, dyn dynamic.Interface) ([]string, error) {
	gvr := schema.GroupVersionResource{Group: groupsuffix.Group(groupsuffix.Config, s.conc.Suffix()), Version: groupsuffix.Version, Resource: "credentialissuers"}
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, item := range list.Items {
		var ci configv1alpha1.CredentialIssuer
		if runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &ci) != nil {
			continue
		}
		for _, st := range ci.Status.Strategies {
			if f := st.Frontend; f != nil && f.ImpersonationProxyInfo != nil {
				out = append(out, f.ImpersonationProxyInfo.Endpoint)
			} else if f != nil && f.TokenCredentialRequestAPIInfo != nil {
				out = append(out, f.TokenCredentialRequestAPIInfo.Server)
			}
		}
	}
	return out, nil
}

// sameServer: two server URLs name one endpoint (scheme, host and port,
// the default port spelt or not).
func sameServer(a, b string) bool {
	norm := func(raw string) string {
		if !strings.Contains(raw, "://") {
			raw = "https://" + raw // an advertised endpoint may be a bare host[:port]
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return raw
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[strings.ToLower(u.Scheme)]
		}
		return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
	}
	return norm(a) == norm(b)
}

// refused turns a refusal of a read into a SKIP naming what could not be
// read (most users may not read the agent's objects: that is no fault),
// and a refusal of the credential into a FAIL; other errors are left to
// the caller.
func (s *agentFacts) refused(err error, what string) (Result, bool) {
	switch {
	case apierrors.IsForbidden(err) && s.d.Admin != nil:
		return fail(err.Error(), fmt.Sprintf("--admin-kubeconfig's credential may not read %s: use an administrator's kubeconfig", what)), true
	case apierrors.IsForbidden(err):
		return skip("your login may not read %s, as most users may not: an administrator can check it with `pinniped doctor --admin-kubeconfig=THEIRS` on this kubeconfig", what), true
	case apierrors.IsUnauthorized(err) && s.cred == nil:
		return fail(err.Error(), "the cluster refused the kubeconfig's own token or certificate (401): get a new one, or "+regenerate), true
	case apierrors.IsUnauthorized(err):
		return fail(err.Error(), "the cluster refused the cached credential (401): run `pinniped logout`, then `kubectl get ns` to log in again"), true
	}
	return Result{}, false
}

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

func checkAPIServices(ctx context.Context, s *agentFacts) Result {
	dyn, res, can := s.agentClient(ctx)
	if !can {
		return res
	}
	var good []string
	for _, name := range groupsuffix.APIServiceNames(s.conc.Suffix()) {
		u, err := dyn.Resource(apiServiceGVR).Get(ctx, name, metav1.GetOptions{})
		if res, done := s.refused(err, "the APIService "+name); done {
			return res
		}
		if apierrors.IsNotFound(err) {
			return fail(err.Error(), fmt.Sprintf("the APIService %s does not exist: install the agent (`pinniped install`), or fix --concierge-api-group-suffix (%s) in the exec entry", name, s.conc.Suffix()))
		}
		if err != nil {
			return fail(err.Error(), fmt.Sprintf("the APIService %s cannot be read (%v): try again, or ask your administrator", name, err))
		}
		var svc struct {
			Status struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
			return fail(err.Error(), fmt.Sprintf("the APIService %s is unreadable (%v): ask your administrator", name, err))
		}
		i := slices.IndexFunc(svc.Status.Conditions, func(c metav1.Condition) bool { return c.Type == "Available" })
		if i < 0 || svc.Status.Conditions[i].Status != metav1.ConditionTrue {
			msg := "no Available condition"
			if i >= 0 {
				msg = svc.Status.Conditions[i].Reason + ": " + svc.Status.Conditions[i].Message
			}
			return fail(msg, fmt.Sprintf("the APIService %s is not available (%s): ask your administrator to check the agent's pods and Service", name, msg))
		}
		good = append(good, name)
	}
	return ok("%s Available", strings.Join(good, " and "))
}

// proxyInfo is an impersonation proxy the CredentialIssuer advertises.
type proxyInfo struct {
	endpoint string
	ca       []byte
}

func checkCredentialIssuer(ctx context.Context, s *agentFacts) Result {
	dyn, res, can := s.agentClient(ctx)
	if !can {
		s.credentialIssuerErr = "needs the CredentialIssuer (agent.credentialissuer)"
		return res
	}
	s.credentialIssuerErr = "the CredentialIssuer could not be read (agent.credentialissuer)"
	gvr := schema.GroupVersionResource{Group: groupsuffix.Group(groupsuffix.Config, s.conc.Suffix()), Version: groupsuffix.Version, Resource: "credentialissuers"}
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if res, done := s.refused(err, "CredentialIssuers ("+gvr.Group+")"); done {
		return res
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fail(err.Error(), fmt.Sprintf("the cluster has no CredentialIssuer API (%s): install the agent, or fix --concierge-api-group-suffix in the exec entry", gvr.Group))
		}
		return fail(err.Error(), fmt.Sprintf("the CredentialIssuers cannot be listed (%v): try again, or ask your administrator", err))
	}
	if len(list.Items) == 0 {
		return fail("none", "the cluster has no CredentialIssuer, so the agent has not started: ask your administrator to check the agent's pods")
	}
	s.credentialIssuerErr = ""
	var lines []string
	success := false
	var firstError string
	for _, item := range list.Items {
		var ci configv1alpha1.CredentialIssuer
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &ci); err != nil {
			return fail(err.Error(), fmt.Sprintf("the CredentialIssuer %s is unreadable (%v): ask your administrator", item.GetName(), err))
		}
		var parts []string
		for _, st := range ci.Status.Strategies {
			p := fmt.Sprintf("%s %s/%s", st.Type, st.Status, st.Reason)
			if f := st.Frontend; f != nil {
				switch {
				case f.ImpersonationProxyInfo != nil:
					p += " via the impersonation proxy at " + f.ImpersonationProxyInfo.Endpoint
					if st.Status == configv1alpha1.SuccessStrategyStatus {
						ca, _ := base64.StdEncoding.DecodeString(f.ImpersonationProxyInfo.CertificateAuthorityData)
						s.proxies = append(s.proxies, proxyInfo{endpoint: f.ImpersonationProxyInfo.Endpoint, ca: ca})
					}
				case f.TokenCredentialRequestAPIInfo != nil:
					p += " via the TokenCredentialRequest API at " + f.TokenCredentialRequestAPIInfo.Server
				}
			}
			if st.Status == configv1alpha1.SuccessStrategyStatus {
				success = true
			} else if firstError == "" && st.Reason != configv1alpha1.DisabledStrategyReason {
				firstError = fmt.Sprintf("%s %s: %s", st.Type, st.Reason, st.Message)
			}
			parts = append(parts, p)
		}
		if len(parts) == 0 {
			parts = append(parts, "no strategies yet")
		}
		lines = append(lines, ci.Name+": "+strings.Join(parts, "; "))
	}
	detail := strings.Join(lines, " | ")
	if !success {
		fix := "the agent has no working strategy, so it cannot issue credentials"
		if firstError != "" {
			fix += " (" + firstError + ")"
		}
		return fail(detail, fix+": ask your administrator to check the agent (docs/impersonation-proxy.md for managed clusters)")
	}
	return ok("%s", detail)
}

func checkAuthenticator(ctx context.Context, s *agentFacts) Result {
	dyn, res, can := s.agentClient(ctx)
	if !can {
		return res
	}
	c := s.conc
	kind, err := c.Kind()
	if err != nil {
		return skip("needs a valid --concierge-authenticator-type (exec.args)")
	}
	resource := strings.ToLower(kind) + "s"
	gvr := schema.GroupVersionResource{Group: groupsuffix.Group(groupsuffix.Authentication, c.Suffix()), Version: groupsuffix.Version, Resource: resource}
	u, err := dyn.Resource(gvr).Get(ctx, c.AuthenticatorName, metav1.GetOptions{})
	if res, done := s.refused(err, fmt.Sprintf("the %s %q", kind, c.AuthenticatorName)); done {
		return res
	}
	if apierrors.IsNotFound(err) {
		return fail(err.Error(), fmt.Sprintf("the cluster has no %s %q: fix --concierge-authenticator-name/-type in the exec entry, or ask your administrator to create it", kind, c.AuthenticatorName))
	}
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the %s %q cannot be read (%v): try again, or ask your administrator", kind, c.AuthenticatorName, err))
	}
	var status authv1alpha1.JWTAuthenticatorStatus // the webhook's has the same fields
	var spec authv1alpha1.JWTAuthenticatorSpec
	var obj struct {
		Spec   map[string]any `json:"spec"`
		Status map[string]any `json:"status"`
	}
	obj.Spec, _ = u.Object["spec"].(map[string]any)
	obj.Status, _ = u.Object["status"].(map[string]any)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(orEmpty(obj.Status), &status); err != nil {
		return fail(err.Error(), fmt.Sprintf("the %s %q is unreadable (%v): ask your administrator", kind, c.AuthenticatorName, err))
	}
	if kind == "JWTAuthenticator" {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(orEmpty(obj.Spec), &spec)
	}
	name := fmt.Sprintf("%s %q", kind, c.AuthenticatorName)
	if status.Phase != authv1alpha1.PhaseReady {
		var bad []string
		for _, cond := range status.Conditions {
			if cond.Status != metav1.ConditionTrue {
				bad = append(bad, fmt.Sprintf("%s=%s: %s", cond.Type, cond.Status, cond.Message))
			}
		}
		if status.Phase == "" && len(status.Conditions) == 0 {
			// Just created: the agent has not looked at it yet.
			return warn("no status yet", fmt.Sprintf("the agent has not reported the %s's status yet: wait a moment; if it stays so, read the agent's logs", name))
		}
		phase := string(status.Phase)
		if phase == "" {
			phase = "without a phase"
		}
		why := ""
		if len(bad) > 0 {
			why = " (" + strings.Join(bad, "; ") + ")"
		}
		return fail(phase+"; "+strings.Join(bad, "; "), fmt.Sprintf("the %s is %s%s: ask your administrator to fix it", name, phase, why))
	}
	if o := s.oidc; o != nil && kind == "JWTAuthenticator" {
		if spec.Issuer != "" && spec.Issuer != o.Issuer {
			return fail("spec.issuer "+spec.Issuer, fmt.Sprintf("the %s trusts the issuer %s, but this login gets its tokens from %s: fix --issuer in the exec entry, or the authenticator's spec.issuer", name, spec.Issuer, o.Issuer))
		}
		want := o.ClientID
		if o.RequestAudience != "" {
			want = o.RequestAudience
		}
		if !o.PresentsAccessToken() && spec.Audience != "" && spec.Audience != want && !slices.Contains(spec.Audiences, want) {
			return fail("spec.audience "+spec.Audience, fmt.Sprintf("the %s accepts the audience %q, but this login's tokens are for %q: fix --request-audience (or --client-id) in the exec entry, or the authenticator's spec.audience", name, spec.Audience, want))
		}
	}
	return ok("%s is Ready", name)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func checkProxy(ctx context.Context, s *agentFacts) Result {
	if s.conc == nil {
		return skip("%s", s.noAgent())
	}
	if s.credentialIssuerErr != "" {
		return skip("%s", s.credentialIssuerErr)
	}
	if len(s.proxies) == 0 {
		return skip("the agent advertises no working impersonation proxy")
	}
	var done []string
	for _, p := range s.proxies {
		notAfter, err := handshake(ctx, p)
		if err != nil {
			if errors.Is(err, errUnreadableCA) {
				return fail(err.Error(), fmt.Sprintf("the CA the CredentialIssuer advertises for the impersonation proxy at %s is unreadable (no PEM certificate): ask your administrator to check the agent's impersonation proxy CA", p.endpoint))
			}
			if notTLS(err) {
				return fail(err.Error(), fmt.Sprintf("the impersonation proxy at %s does not speak TLS at that address (%v): ask your administrator to check the CredentialIssuer's impersonation proxy endpoint", p.endpoint, err))
			}
			if isTLSTrust(err) {
				return fail(err.Error(), fmt.Sprintf("the impersonation proxy at %s presents a certificate its advertised CA does not sign (%v): ask your administrator to check spec.impersonationProxy.tls of the CredentialIssuer", p.endpoint, err))
			}
			return fail(err.Error(), fmt.Sprintf("the impersonation proxy at %s does not answer (%v): check the network, or ask your administrator to check its Service", p.endpoint, err))
		}
		left := notAfter.Sub(s.d.f.Now())
		if left < certWarning {
			return warn(fmt.Sprintf("%s: certificate until %s", p.endpoint, notAfter.UTC().Format(time.RFC3339)),
				fmt.Sprintf("the impersonation proxy's certificate at %s expires in %s: ask your administrator to renew it", p.endpoint, left.Round(time.Minute)))
		}
		done = append(done, fmt.Sprintf("%s: certificate trusted, valid until %s", p.endpoint, notAfter.UTC().Format(time.RFC3339)))
	}
	return ok("%s", strings.Join(done, "; "))
}

// errUnreadableCA: the CredentialIssuer advertises a CA that holds no PEM
// certificate, so nothing could be checked against it.
var errUnreadableCA = errors.New("the advertised CA holds no PEM certificate")

// handshake connects to the proxy trusting only its advertised CA and
// returns when its serving certificate ends.
func handshake(ctx context.Context, p proxyInfo) (time.Time, error) {
	name, addr, err := dialAddress(p.endpoint)
	if err != nil {
		return time.Time{}, err
	}
	// The proxy's own CA, never the system's roots.
	if len(p.ca) == 0 {
		return time.Time{}, errUnreadableCA
	}
	cfg, err := httpclient.TLSConfig(p.ca)
	if err != nil {
		return time.Time{}, errUnreadableCA
	}
	cfg.ServerName = name
	d := &tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = conn.Close() }()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return time.Time{}, fmt.Errorf("no certificate")
	}
	return certs[0].NotAfter, nil
}

// dialAddress is the TLS server name and the host:port of an endpoint, a
// URL or a bare host[:port] (an IPv6 address in brackets): Hostname strips
// those brackets, JoinHostPort puts them back.
func dialAddress(endpoint string) (name, addr string, err error) {
	raw := endpoint
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", "", fmt.Errorf("the endpoint %q is not a host or URL", endpoint)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return u.Hostname(), net.JoinHostPort(u.Hostname(), port), nil
}
