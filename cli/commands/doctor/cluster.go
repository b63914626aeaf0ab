package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/pinniped-kit/pinniped/agent/apis/tokentimes"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

// Skew thresholds between this machine and the cluster or the issuer.
// Beyond credcache.DefaultSkew the margin a login keeps before a
// credential's expiry no longer covers the clocks' difference; beyond
// tokentimes.CLISkew the CLI refuses the issuer's tokens (and no
// JWTAuthenticator may allow more).
var (
	warnSkew = credcache.DefaultSkew
	failSkew = tokentimes.CLISkew
)

func checkClusterAPI(ctx context.Context, s *clusterFacts) Result {
	if s.anon == nil {
		return skip("needs the context (kubeconfig.context)")
	}
	u, err := serverURL(s.anon)
	if err != nil {
		s.clusterUnsafe = "the cluster's server is not a URL, so no credential is sent to it (cluster.api)"
		return fail(err.Error(), fmt.Sprintf("the cluster's server %q is not a URL (%v): fix it in the kubeconfig", s.anon.Host, err))
	}
	if !strings.EqualFold(u.Scheme, "https") {
		// Not even asked: nothing is to be learnt from a clear-text answer.
		// A server without a scheme and without a CA is http to client-go.
		s.clusterUnsafe = "the cluster's server is plain http, so no credential is sent to it (cluster.api)"
		return fail("http: "+s.anon.Host, fmt.Sprintf("the cluster's server %s is plain http (client-go reaches it as %s://%s), so kubectl sends your credential in clear text: set its https address and certificate-authority-data in the kubeconfig, or %s", s.anon.Host, u.Scheme, u.Host, regenerate))
	}
	if s.anon.Insecure {
		// Asked anonymously all the same: whether it answers is still news.
		s.clusterUnsafe = "the kubeconfig turns off certificate checks for this cluster, so no credential is sent to it (cluster.api)"
	}
	client, err := rest.HTTPClientFor(s.anon)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the kubeconfig's cluster settings are unusable (%v): fix the cluster's server and certificate-authority", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(u.String(), "/")+"/version", nil)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the cluster's server %q is not a URL: fix it in the kubeconfig", s.anon.Host))
	}
	before := s.d.f.Now()
	resp, err := client.Do(req)
	after := s.d.f.Now()
	if err != nil {
		// Every later check that asks the cluster would wait out its
		// timeout on the same cause.
		s.clusterDown = true
		if notTLS(err) {
			return fail(err.Error(), fmt.Sprintf("the API server at %s does not speak TLS at that address (%v): fix the cluster's server (its https port) in the kubeconfig, or %s", s.anon.Host, err, regenerate))
		}
		if isTLSTrust(err) {
			return fail(err.Error(), fmt.Sprintf("the API server at %s presents a certificate the kubeconfig does not trust (%v): fix the cluster's certificate-authority-data, or %s", s.anon.Host, err, regenerate))
		}
		s.clusterSilent = true
		if s.conc != nil && sameServer(s.conc.Endpoint, s.anon.Host) {
			// The exec entry cannot say whether this server is the API
			// server or the agent's impersonation proxy (managed clusters):
			// if the latter, its silence is the agent's.
			return fail(err.Error(), fmt.Sprintf("the cluster's server %s does not answer (%v): check the server address, the network and any proxy; if it is the agent's impersonation proxy (on managed clusters), the agent may be down: ask your administrator to check its pods (`pinniped doctor --admin-kubeconfig=THEIRS` shows its APIServices)", s.anon.Host, err))
		}
		return fail(err.Error(), fmt.Sprintf("the API server at %s does not answer (%v): check the server address, the network and any proxy", s.anon.Host, err))
	}
	defer func() { _ = resp.Body.Close() }()
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		sk := skewOf(d, before, after)
		s.clusterSkew = &sk
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v)
	if s.anon.Insecure {
		return warn(fmt.Sprintf("insecure-skip-tls-verify; HTTP %d", resp.StatusCode), fmt.Sprintf("the kubeconfig turns off certificate checks for %s (insecure-skip-tls-verify), so anyone on the way can take the credential kubectl sends: set the cluster's certificate-authority-data instead, or %s", s.anon.Host, regenerate))
	}
	switch {
	case resp.StatusCode == http.StatusOK && v.GitVersion != "":
		return ok("Kubernetes %s at %s", v.GitVersion, s.anon.Host)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		// Some clusters answer nothing anonymously; it still answered.
		return ok("%s answers (HTTP %d to an anonymous request)", s.anon.Host, resp.StatusCode)
	}
	return warn(fmt.Sprintf("HTTP %d", resp.StatusCode), fmt.Sprintf("%s answered GET /version with HTTP %d, which a Kubernetes API server does not: check the kubeconfig's server address", s.anon.Host, resp.StatusCode))
}

// skewOf is how far a server whose Date header said d is ahead of this
// machine (negative: behind), the request sent at before and answered at
// after. Date is truncated to the second, so half a second is added back.
func skewOf(d, before, after time.Time) time.Duration {
	mid := before.Add(after.Sub(before) / 2)
	return d.Add(500 * time.Millisecond).Sub(mid).Round(time.Second)
}

// describeSkew says how a clock s ahead of than's stands, in words.
func describeSkew(s time.Duration, than string) string {
	switch {
	case s.Abs() < time.Second:
		return "in step with " + than
	case s > 0:
		return s.String() + " ahead of " + than
	}
	return (-s).String() + " behind " + than
}

func judgeSkew(s time.Duration) Status {
	switch {
	case s.Abs() > failSkew:
		return Fail
	case s.Abs() > warnSkew:
		return Warn
	}
	return OK
}

func checkClockCluster(_ context.Context, s *clusterFacts) Result {
	if s.clusterSkew == nil {
		return skip("the API server gave no time (cluster.api)")
	}
	sk := *s.clusterSkew
	detail := "the cluster's clock is " + describeSkew(sk, "this machine's")
	switch judgeSkew(sk) {
	case Fail:
		return fail(detail, fmt.Sprintf("%s, beyond the %s that credentials allow: set this machine's clock (NTP), or ask your administrator to fix the nodes'", detail, failSkew))
	case Warn:
		return warn(detail, fmt.Sprintf("%s, more than the %s margin kept before a credential expires: set this machine's clock (NTP)", detail, warnSkew))
	}
	return ok("%s", detail)
}

// judgeClusterSkew judges an issuer's clock vs ahead of the cluster's
// (negative: behind) by the rules of whatever checks the times of its
// tokens there:
//   - no Concierge: kube-apiserver takes the ID token itself; it allows no
//     time past exp and 1 minute on nbf, does not check iat, and has no
//     setting for skew;
//   - a JWTAuthenticator: the agent, by tokentimes.Check, which
//     spec.allowedClockSkew widens (doctor cannot tell whether it is set);
//   - a WebhookAuthenticator: the webhook, by its own rules; the agent
//     checks no token times, so there is nothing to judge here.
func judgeClusterSkew(vs time.Duration, conc *config.Concierge) (Status, string) {
	jwt := conc != nil && strings.EqualFold(conc.AuthenticatorType, "jwt")
	if conc != nil && !jwt {
		return OK, ""
	}
	checker := "kube-apiserver, which allows no time past exp,"
	if jwt {
		checker = "the agent"
	}
	var need time.Duration
	var why string
	switch {
	case vs > tokentimes.NotBeforeLeeway && jwt:
		need = vs - tokentimes.NotBeforeLeeway
		why = fmt.Sprintf("its tokens are issued (iat) more than the %s the agent allows ahead of the cluster's clock, so the agent refuses them", tokentimes.NotBeforeLeeway)
	case vs > tokentimes.NotBeforeLeeway:
		need = vs - tokentimes.NotBeforeLeeway
		why = fmt.Sprintf("kube-apiserver refuses its tokens that carry an nbf (not before) more than the %s it allows ahead of the cluster's clock", tokentimes.NotBeforeLeeway)
	case -vs > warnSkew:
		need = (-vs).Round(time.Second)
		// Only a token that lives less than the skew (plus its time in
		// transit, hence "about") has expired by the time it arrives.
		why = fmt.Sprintf("its tokens reach the cluster %s older than it meant, so %s refuses those that live less than about %s (e.g. a Pinniped Supervisor's 2-minute ones)", need, checker, need)
	default:
		return OK, ""
	}
	need = need.Round(time.Second)
	clocks := "fix the clock (NTP) of the issuer or of the cluster's nodes"
	if !jwt {
		status := Warn
		if need > failSkew {
			status = Fail
		}
		return status, fmt.Sprintf("the issuer's clock is %s: %s; kube-apiserver has no setting for clock skew: %s", describeSkew(vs, "the cluster's"), why, clocks)
	}
	if need > tokentimes.MaxClockSkew {
		return Fail, fmt.Sprintf("the issuer's clock is %s: %s, and no spec.allowedClockSkew allows more than %s: %s", describeSkew(vs, "the cluster's"), why, tokentimes.MaxClockSkew, clocks)
	}
	name := "the JWTAuthenticator"
	if conc.AuthenticatorName != "" {
		name = fmt.Sprintf("the JWTAuthenticator %q", conc.AuthenticatorName)
	}
	return Warn, fmt.Sprintf("the issuer's clock is %s: %s unless %s has spec.allowedClockSkew of at least %s (its Ready condition states it): ask the cluster's administrator to set that, or to %s", describeSkew(vs, "the cluster's"), why, name, need, clocks)
}
