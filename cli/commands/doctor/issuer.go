package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pinniped-kit/pinniped/agent/apis/httpsurl"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/discovery"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
)

// certWarning: a serving certificate closer than this to its end is worth a WARN.
const certWarning = 7 * 24 * time.Hour

// issuerProbe is one GET of the issuer's discovery URL, shared by the
// clock and TLS checks.
type issuerProbe struct {
	client *http.Client
	status int
	leaf   *x509.Certificate
	skew   *time.Duration
	err    error
	// plain: the issuer is not https (err says how).
	plain bool
}

func noIssuer(s *issuerFacts) string {
	if s.static != nil {
		return "static-token logins have no OIDC issuer"
	}
	return needsArgs
}

func (s *issuerFacts) probeIssuer(ctx context.Context) *issuerProbe {
	if s.issuer != nil {
		return s.issuer
	}
	p := &issuerProbe{}
	s.issuer = p
	p.client, p.err = s.d.f.HTTPClient(s.oidc.CABundle, 0)
	if p.err != nil {
		return p
	}
	// A login sends codes and tokens there: never over plain http, and
	// never reported trusted without a certificate.
	if err := httpsurl.Check("the issuer", s.oidc.Issuer); err != nil {
		p.err, p.plain = err, true
		return p
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(s.oidc.Issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		p.err = err
		return p
	}
	before := s.d.f.Now()
	resp, err := p.client.Do(req)
	after := s.d.f.Now()
	if err != nil {
		// The client refuses a redirect to http (its error wraps
		// ErrNotHTTPS): the issuer is not served over https either way.
		p.err, p.plain = err, errors.Is(err, httpsurl.ErrNotHTTPS)
		return p
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	p.status = resp.StatusCode
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		// A redirect to http, or a proxy answering in clear text.
		p.err, p.plain = fmt.Errorf("the issuer answered %s without TLS: %w", resp.Request.URL.Redacted(), httpsurl.ErrNotHTTPS), true
		return p
	}
	p.leaf = resp.TLS.PeerCertificates[0]
	if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		sk := skewOf(d, before, after)
		p.skew = &sk
	}
	return p
}

// isTLSTrust reports whether err is a certificate this side does not
// accept (unknown authority, wrong name, expired).
func isTLSTrust(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid)
}

// notTLS reports whether err is a server answering a TLS handshake with
// something else (plain http, another protocol): no certificate to trust
// at all, so a CA would not help.
func notTLS(err error) bool {
	var record tls.RecordHeaderError
	// net/http turns a RecordHeaderError from an http server into a plain
	// error; its text is the only sign left.
	return errors.As(err, &record) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

func (s *issuerFacts) trustFix() string {
	fix := "pass the issuer's CA with --oidc-ca-bundle to `pinniped get kubeconfig` (it becomes --ca-bundle-data in the exec entry)"
	if c := s.conc; c != nil && strings.EqualFold(c.AuthenticatorType, "jwt") {
		fix += fmt.Sprintf(", and trust it in spec.tls of the JWTAuthenticator %q", c.AuthenticatorName)
	}
	return fix
}

func checkIssuerTLS(ctx context.Context, s *issuerFacts) Result {
	if s.oidc == nil {
		return skip("%s", noIssuer(s))
	}
	p := s.probeIssuer(ctx)
	if p.client == nil {
		return fail(p.err.Error(), fmt.Sprintf("the issuer's CA bundle is unusable (%v): %s", p.err, s.trustFix()))
	}
	if p.err != nil {
		switch {
		case p.plain:
			return fail(p.err.Error(), fmt.Sprintf("the issuer %s is not served over https (%v): fix --issuer in the exec entry to its https URL, or %s", s.oidc.Issuer, p.err, regenerate))
		case notTLS(p.err):
			return fail(p.err.Error(), fmt.Sprintf("the issuer %s does not speak TLS at that address (%v): check the issuer URL's port, or tell the provider's administrator", s.oidc.Issuer, p.err))
		}
		if isTLSTrust(p.err) {
			return fail(p.err.Error(), fmt.Sprintf("the issuer's TLS certificate is not trusted (%v): %s", p.err, s.trustFix()))
		}
		return fail(p.err.Error(), fmt.Sprintf("the issuer %s is unreachable from here (%v): check the issuer URL, DNS, the network and any HTTPS_PROXY", s.oidc.Issuer, p.err))
	}
	from := "this machine's trusted CAs"
	if len(s.oidc.CABundle) > 0 {
		from = "the kubeconfig's CA bundle"
	}
	left := p.leaf.NotAfter.Sub(s.d.f.Now())
	detail := fmt.Sprintf("trusted through %s; its certificate is valid until %s", from, p.leaf.NotAfter.UTC().Format(time.RFC3339))
	if left < certWarning {
		return warn(detail, fmt.Sprintf("the issuer's certificate expires in %s: tell the provider's administrator to renew it", left.Round(time.Minute)))
	}
	return ok("%s", detail)
}

func (s *issuerFacts) needsDiscovery(ctx context.Context) (string, bool) {
	if s.oidc == nil {
		return noIssuer(s), false
	}
	if p := s.probeIssuer(ctx); p.client == nil || p.err != nil {
		return "the issuer is unreachable or untrusted (issuer.tls)", false
	}
	return "", true
}

func checkDiscovery(ctx context.Context, s *issuerFacts) Result {
	if why, can := s.needsDiscovery(ctx); !can {
		return skip("%s", why)
	}
	doc, err := discovery.Fetch(ctx, s.issuer.client, s.oidc.Issuer)
	if err != nil {
		// Fetch's errors say what to do already.
		return fail(err.Error(), err.Error())
	}
	s.doc = doc
	detail := fmt.Sprintf("%s publishes its endpoints", doc.Issuer)
	if doc.IsSupervisor() {
		detail += " (a Pinniped Supervisor)"
	}
	return ok("%s", detail)
}

func checkJWKS(ctx context.Context, s *issuerFacts) Result {
	if s.doc == nil {
		return skip("needs the discovery document (issuer.discovery)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.doc.JWKSURI, nil)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the issuer's jwks_uri %q is not a URL: tell the provider's administrator", s.doc.JWKSURI))
	}
	resp, err := s.issuer.client.Do(req)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the issuer's keys at %s cannot be fetched (%v): check the network, or tell the provider's administrator", s.doc.JWKSURI, err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Sprintf("HTTP %d", resp.StatusCode), fmt.Sprintf("the issuer's keys at %s answer HTTP %d: tell the provider's administrator", s.doc.JWKSURI, resp.StatusCode))
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Alg string `json:"alg"`
			Use string `json:"use"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return fail(err.Error(), fmt.Sprintf("the issuer's keys at %s are not a JSON Web Key Set (%v): tell the provider's administrator", s.doc.JWKSURI, err))
	}
	var kinds []string
	for _, k := range set.Keys {
		if k.Use == "enc" {
			continue
		}
		kinds = append(kinds, strings.TrimSpace(k.Kty+" "+k.Alg))
	}
	if len(kinds) == 0 {
		return fail("no signing keys", fmt.Sprintf("the issuer publishes no signing key at %s, so no token from it can be verified: tell the provider's administrator", s.doc.JWKSURI))
	}
	noun := "signing keys"
	if len(kinds) == 1 {
		noun = "signing key"
	}
	return ok("%d %s (%s)", len(kinds), noun, strings.Join(kinds, ", "))
}

func checkClient(ctx context.Context, s *issuerFacts) Result {
	if s.doc == nil {
		return skip("needs the discovery document (issuer.discovery)")
	}
	c := s.oidc
	switch {
	case c.Flow == config.FlowDevice:
		if s.doc.DeviceAuthorizationEndpoint == "" {
			return fail("no device_authorization_endpoint", "the issuer offers no device flow (its discovery lists no https device_authorization_endpoint): drop --flow=device from the exec entry")
		}
		return ok("the issuer offers the device flow (not tried: that would start a login)")
	case c.PasswordLogin():
		return skip("password logins do not use the authorize endpoint, and trying the password would be a login")
	}
	redirect, err := redirectURI(ctx, c.ListenPort, c.SkipListen)
	if err != nil {
		return skip("no loopback port to name in the redirect URI: %v", err)
	}
	// The very request a browser login would send, from the same builder.
	authorize, err := oidclogin.New(ctx, c, s.issuer.client, s.doc, s.d.f.Now).NewAuthorizeRequest(redirect, c.Upstream)
	if err != nil {
		return fail(err.Error(), "no authorize request could be made on this machine: run doctor again")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authorize.URL, nil)
	if err != nil {
		return fail(err.Error(), "the authorize request cannot be made: tell the provider's administrator")
	}
	// Not followed: the provider's first answer says whether it takes the
	// request; following it would lead to a login page.
	client := *s.issuer.client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the authorization endpoint %s does not answer (%v): check the network, or tell the provider's administrator", s.doc.AuthorizationEndpoint, err))
	}
	defer func() { _ = resp.Body.Close() }()
	refused := fmt.Sprintf("the provider refused client id %q or the redirect URI %s (HTTP %d)", c.ClientID, redirect, resp.StatusCode)
	uri := "http://127.0.0.1/callback (any port)"
	if c.ListenPort != 0 {
		uri = redirect
	}
	register := fmt.Sprintf(": register %s as a redirect URI of client %q at the provider, or fix --client-id in the exec entry", uri, c.ClientID)
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		// Providers refuse by redirecting with an error: back to the
		// redirect URI, or to an error page of their own.
		if loc, err := resp.Location(); err == nil && loc.Query().Has("error") {
			e := loc.Query().Get("error")
			if d := loc.Query().Get("error_description"); d != "" {
				e += ": " + d
			}
			return fail(e, fmt.Sprintf("the provider refused the authorize request for client %q (%s)%s", c.ClientID, e, register))
		}
		return ok("the provider accepted the authorize request (HTTP %d to its login)", resp.StatusCode)
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return ok("the provider did not refuse the authorize request at its first answer (HTTP %d): a provider that shows errors as ordinary pages cannot be told apart", resp.StatusCode)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return warn(fmt.Sprintf("HTTP %d", resp.StatusCode), fmt.Sprintf("could not tell whether the provider accepts client id %q: its authorization endpoint answered HTTP %d; try again later", c.ClientID, resp.StatusCode))
	}
	return fail(fmt.Sprintf("HTTP %d", resp.StatusCode), refused+register)
}

// redirectURI is the callback a browser login would name: on the
// --listen-port, else on a free port, as the login picks one (port 0
// when it does not listen: paste-only logins name that).
func redirectURI(ctx context.Context, port int, noListener bool) (string, error) {
	if noListener {
		port = 0
	} else if port == 0 {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	return "http://127.0.0.1:" + strconv.Itoa(port) + "/callback", nil
}

func checkUpstream(ctx context.Context, s *issuerFacts) Result {
	if s.doc == nil {
		return skip("needs the discovery document (issuer.discovery)")
	}
	up := s.oidc.Upstream
	if !s.doc.IsSupervisor() {
		if up.Name != "" {
			return fail("not a Supervisor", fmt.Sprintf("--upstream-identity-provider-name %q is set, but the issuer is not a Pinniped Supervisor: drop the flag from the exec entry, or fix --issuer", up.Name))
		}
		return skip("the issuer is not a Pinniped Supervisor")
	}
	list, err := s.doc.IdentityProviders(ctx, s.issuer.client)
	if err != nil {
		return fail(err.Error(), fmt.Sprintf("the Supervisor's identity providers cannot be listed (%v): tell the Supervisor's administrator", err))
	}
	if up.Name == "" {
		if len(list.Providers) > 1 {
			return warn(list.String(), "the Supervisor lists several identity providers and the login names none: add --upstream-identity-provider-name to the exec entry (`pinniped get kubeconfig` asks which)")
		}
		return ok("the Supervisor lists %s", list)
	}
	typ := up.Type
	if typ == "" {
		typ = "oidc"
	}
	if !list.SupportsType(typ) {
		return fail(list.String(), fmt.Sprintf("--upstream-identity-provider-type %q is not a type the Supervisor supports (%s): fix the exec entry", typ, strings.Join(list.Types, ", ")))
	}
	if len(list.Find(up.Name, typ)) == 0 {
		return fail(list.String(), fmt.Sprintf("the Supervisor has no identity provider %q of type %s (it lists %s): fix --upstream-identity-provider-name/-type in the exec entry", up.Name, typ, list))
	}
	return ok("the Supervisor lists %q (%s)", up.Name, typ)
}

func checkClockIssuer(ctx context.Context, s *issuerFacts) Result {
	if s.oidc == nil {
		return skip("%s", noIssuer(s))
	}
	p := s.probeIssuer(ctx)
	if p.err != nil || p.skew == nil {
		return skip("the issuer gave no time (issuer.tls)")
	}
	sk := *p.skew
	detail := "the issuer's clock is " + describeSkew(sk, "this machine's")
	status, fix := judgeSkew(sk), ""
	// When the cluster's clock agrees with this machine's, the issuer's is
	// the odd one out: blame it, not the user's.
	mine := s.clusterSkew == nil || judgeSkew(*s.clusterSkew) != OK
	switch {
	case status == Fail && mine:
		fix = fmt.Sprintf("%s, beyond the %s tokens allow: set this machine's clock (NTP), or ask the provider's administrator", detail, failSkew)
	case status == Fail:
		fix = fmt.Sprintf("%s (and the cluster's agrees with this machine's), beyond the %s tokens allow: ask the provider's administrator to fix the issuer's clock (NTP)", detail, failSkew)
	case status == Warn && mine:
		fix = detail + ": set this machine's clock (NTP)"
	case status == Warn:
		fix = detail + " (and the cluster's agrees with this machine's): ask the provider's administrator to fix the issuer's clock (NTP)"
	}
	if s.clusterSkew != nil {
		// What the cluster sees: tokens stamped by the issuer, checked on the cluster's clock.
		vs := sk - *s.clusterSkew
		detail += ", and " + describeSkew(vs, "the cluster's")
		if st, f := judgeClusterSkew(vs, s.conc); st == Fail || (st == Warn && status != Fail) {
			status, fix = st, f
		}
	}
	return Result{Status: status, Detail: detail, Fix: fix}
}
