//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	"github.com/pinniped-kit/pinniped/agent/authentication/identityrule"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// identityCase is an identity an identity provider could assert: each
// security-relevant spelling of a name, beside plain ones that must work.
type identityCase struct {
	label    string
	username string
	uid      string
	groups   []string
}

// identityCases: whitespace and tabs around system: names and ordinary
// ones, case, Unicode spaces, commas, control characters, long values.
var identityCases = []identityCase{
	{label: "plain", username: "diff-alice", groups: []string{"diff-admins", "diff-devs"}},
	{label: "UID", username: "diff-alice", uid: "4711", groups: []string{"diff-devs"}},
	{label: "no groups", username: "diff-alice"},
	{label: "leading space system:masters", username: "diff-alice", groups: []string{" system:masters"}},
	{label: "trailing space system:masters", username: "diff-alice", groups: []string{"system:masters "}},
	{label: "leading tab system:masters", username: "diff-alice", groups: []string{"\tsystem:masters"}},
	{label: "system:masters", username: "diff-alice", groups: []string{"system:masters"}},
	{label: "System:masters in capitals", username: "diff-alice", groups: []string{"System:masters", "SYSTEM:MASTERS"}},
	{label: "no-break space system:masters", username: "diff-alice", groups: []string{"\u00a0system:masters"}},
	{label: "ideographic space system:masters", username: "diff-alice", groups: []string{"\u3000system:masters"}},
	{label: "zero-width space system:masters", username: "diff-alice", groups: []string{"\u200bsystem:masters"}},
	{label: "comma", username: "diff-alice", groups: []string{"diff-admins, system:masters", "a,b"}},
	{label: "inner tab", username: "diff-alice", groups: []string{"diff\tadmins"}},
	{label: "trailing space group", username: "diff-alice", groups: []string{"diff-admins "}},
	{label: "leading space group", username: "diff-alice", groups: []string{" diff-admins"}},
	{label: "DEL in a group", username: "diff-alice", groups: []string{"diff\x7fadmins"}},
	{label: "long group", username: "diff-alice", groups: []string{strings.Repeat("g", 2000)}},
	{label: "leading space system username", username: " system:kube-controller-manager"},
	{label: "trailing space system username", username: "system:kube-controller-manager "},
	{label: "system username", username: "system:kube-controller-manager"},
	{label: "trailing space username", username: "diff-alice ", groups: []string{"diff-admins"}},
	{label: "leading space username", username: " diff-alice"},
	{label: "no-break space username", username: "diff-alice\u00a0"},
	{label: "long username", username: strings.Repeat("u", 2000)},
	{label: "trailing space UID", username: "diff-alice", uid: "4711 "},
}

// seenUser is an identity as kube-apiserver's audit log records it.
type seenUser struct {
	Username string              `json:"username"`
	UID      string              `json:"uid"`
	Groups   []string            `json:"groups"`
	Extra    map[string][]string `json:"extra"`
}

// normalized: the part every path must agree on. Groups are a set with
// system:authenticated; the credential ID names each credential and is
// left out.
func (u seenUser) normalized() seenUser {
	g := slices.Clone(u.Groups)
	if !slices.Contains(g, user.AllAuthenticated) {
		g = append(g, user.AllAuthenticated)
	}
	slices.Sort(g)
	e := map[string][]string{}
	for k, v := range u.Extra {
		if k != user.CredentialIDKey && len(v) > 0 {
			e[k] = v
		}
	}
	return seenUser{Username: u.Username, UID: u.UID, Groups: slices.Compact(g), Extra: e}
}

func (u seenUser) equal(o seenUser) bool {
	a, b := u.normalized(), o.normalized()
	return a.Username == b.Username && a.UID == b.UID && slices.Equal(a.Groups, b.Groups) &&
		maps.EqualFunc(a.Extra, b.Extra, func(x, y []string) bool { return slices.Equal(x, y) })
}

// pathResult is one request through one path: the audit ID kube-apiserver
// gave it, or the refusal.
type pathResult struct {
	path    string
	auditID string
	refused string // why, when the path refused the identity
}

// TestIdentityArrivesUnchanged is the identity rule's differential test
// through the real stack (issue 41). kube-apiserver trusts a test issuer
// itself (structured authentication, testbed.DirectIssuer) and the agent
// trusts the same issuer with the same claim rules. For each identity, the
// same token is presented to kube-apiserver directly; what its audit log
// records for that request is the oracle. Through every path of the agent
// (the TokenCredentialRequest's certificate; the impersonation proxy with
// that certificate and with its own token: a read (GET /version) over
// HTTP/2 and over HTTP/1.1, which the proxy sends upstream over HTTP/1.1;
// a create (a SelfSubjectReview), which it sends over HTTP/2; and an
// HTTP/1.1 upgrade, sent over HTTP/1.1; and
// pinniped proxy to the API server and to the impersonation proxy), the
// audit log must record exactly that identity, or the path must refuse
// it. An identity the rule accepts must get through every path that can
// carry it, so the test cannot pass by refusing everyone.
func TestIdentityArrivesUnchanged(t *testing.T) {
	cfg := Bed.Config()
	pinniped := installAgent(t)
	ctx := context.Background()

	iss := startDirectIssuer(t)
	bedCA, err := os.ReadFile(cfg.TestbedCAFile())
	if err != nil {
		t.Fatal(err)
	}
	mint := func(c identityCase) string {
		claims := map[string]any{"iss": iss.URL, "aud": testbed.DirectAudience, "sub": "diff", "exp": time.Now().Add(time.Hour).Unix(),
			"iat": time.Now().Unix(), "username": c.username, "groups": c.groups}
		if c.groups == nil {
			claims["groups"] = []string{}
		}
		if c.uid != "" {
			claims["uid"] = c.uid
		}
		return iss.Sign(t, claims)
	}

	applyYAML(t, fmt.Sprintf(`apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: direct}
spec:
  issuer: %s
  audience: %s
  tls: {certificateAuthorityData: %s}
  claimMappings:
%s`, iss.URL, testbed.DirectAudience, base64.StdEncoding.EncodeToString(bedCA), indentYAML(testbed.DirectClaimMappings, "    ")))
	waitPhase(t, "jwtauthenticator", "direct", "Ready")

	if cfg.Profile != testbed.ProfileManaged {
		// Auto mode leaves the proxy off beside a control plane.
		Kubectl(t, "patch", "credentialissuer", "pinniped-config", "--type=merge", "-p", `{"spec":{"impersonationProxy":{"mode":"enabled"}}}`)
	}
	strategy := waitProxyStrategy(t, "the impersonation proxy is advertised", proxySucceeds)

	clusterCA, err := os.ReadFile(cfg.ClusterCAFile())
	if err != nil {
		t.Fatal(err)
	}
	apiServer := endpoint{url: cfg.APIServerURL(), ca: clusterCA}
	proxy := endpoint{url: strategy.Endpoint, ca: strategy.CA}

	probe := identityCase{username: "diff-probe"}
	Eventually(t, 90*time.Second, "kube-apiserver trusts the direct issuer", func(ctx context.Context) error {
		if r := apiServer.whoami(ctx, t, clientAuth{token: mint(probe)}, hopCreate); r.code != http.StatusCreated {
			return fmt.Errorf("HTTP %d %s", r.code, r.body)
		}
		return nil
	})
	in := ourInstall
	in.authenticator = "direct"
	in.waitProxyToken(t, strategy, mint(probe))

	// Where the API server lets anonymous requests reach only health
	// endpoints, nobody without a credential reaches its
	// TokenCredentialRequest API: the paths that start there are not a
	// user's (the managed rows of 1.32-1.34 take them).
	vias := []string{"api", "proxy"}
	if cfg.AnonymousHealthOnly() {
		vias = []string{"proxy"}
		t.Log("the API server allows anonymous requests only to health endpoints: no exchange through it")
	}
	// pinniped proxy, with one context per identity and credential path.
	kc, contexts := identityKubeconfig(t, pinniped, map[string]endpoint{"api": apiServer, "proxy": proxy}, vias, mint)
	proxied, stateDir := startLocalProxyUntil(t, pinniped, kc, func(c state.Context) bool { return c.State == "ready" || localProxyRefused(c) })

	type outcome struct {
		c      identityCase
		direct pathResult
		paths  []pathResult
	}
	var outcomes []outcome
	for i, c := range identityCases {
		tok := mint(c)
		o := outcome{c: c, direct: apiServer.request(ctx, t, "direct", clientAuth{token: tok}, hopCreate)}
		if o.direct.refused != "" {
			t.Fatalf("%s: kube-apiserver itself refused the token: %s", c.label, o.direct.refused)
		}
		// The TokenCredentialRequest at the API server: a certificate.
		if slices.Contains(vias, "api") {
			cred, msg := in.tcr(t, apiServer, tok)
			if len(cred.Cert) == 0 {
				o.paths = append(o.paths, pathResult{path: "TokenCredentialRequest", refused: "exchange: " + msg})
			} else {
				auth := clientAuth{cert: string(cred.Cert), key: string(cred.Key)}
				o.paths = append(o.paths, apiServer.request(ctx, t, "certificate", auth, hopCreate))
				for _, v := range proxyVariants {
					o.paths = append(o.paths, proxy.request(ctx, t, "impersonation proxy, certificate, "+v.name, auth.with(v), v.hop))
				}
			}
		}
		// The TokenCredentialRequest at the proxy: its own token.
		pcred, msg := in.tcr(t, proxy, tok)
		if pcred.Token == "" {
			o.paths = append(o.paths, pathResult{path: "proxy's TokenCredentialRequest", refused: "exchange: " + msg})
		} else {
			for _, v := range proxyVariants {
				o.paths = append(o.paths, proxy.request(ctx, t, "impersonation proxy, token, "+v.name, clientAuth{token: pcred.Token}.with(v), v.hop))
			}
		}
		for _, via := range vias {
			o.paths = append(o.paths, localProxyRequest(ctx, t, proxied, stateDir, contexts[i][via], "pinniped proxy to the "+via))
		}
		outcomes = append(outcomes, o)
	}

	audit := readAuditUsers(t)
	var table strings.Builder
	for _, o := range outcomes {
		carried := 0
		for _, p := range o.paths {
			if p.refused == "" {
				carried++
			}
		}
		fmt.Fprintf(&table, "  %-34s %2d of %2d paths carried it, the rest refused\n", o.c.label, carried, len(o.paths))
	}
	t.Logf("identities, through the agent's paths:\n%s", table.String())
	for _, o := range outcomes {
		direct, ok := audit(o.direct.auditID)
		if !ok {
			t.Fatalf("%s: no audit event for the direct request", o.c.label)
		}
		want := seenUser{Username: o.c.username, UID: o.c.uid, Groups: o.c.groups}
		if !direct.equal(want) {
			t.Errorf("%s: kube-apiserver decided %#v for a token asserting %#v: the bed's claim rules are not what the test assumes", o.c.label, direct, want)
		}
		accepted := identityrule.External(&user.DefaultInfo{Name: direct.Username, UID: direct.UID, Groups: withoutAuthenticated(direct.Groups),
			Extra: direct.normalized().Extra}) == nil
		if o.c.label == "plain" && !accepted {
			t.Errorf("the identity rule refuses the plain identity %#v: the test would prove nothing", direct)
		}
		for _, p := range o.paths {
			if p.refused != "" {
				if accepted && mustCarry(cfg, o.c, p.path) {
					t.Errorf("%s via %s: refused (%s), but the identity rule accepts %#v", o.c.label, p.path, p.refused, direct)
				}
				continue
			}
			got, ok := audit(p.auditID)
			switch {
			case !ok:
				t.Errorf("%s via %s: no audit event %s", o.c.label, p.path, p.auditID)
			case !got.equal(direct):
				t.Errorf("%s via %s: kube-apiserver saw %#v, given the token directly %#v", o.c.label, p.path, got.normalized(), direct.normalized())
			case !accepted:
				t.Errorf("%s via %s: an identity the rule refuses got through: %#v", o.c.label, p.path, got)
			}
		}
	}
}

// mustCarry says whether path can carry c's identity, so that a refusal
// there would be wrong: the CSR signer's certificates carry no UID, nor
// does any certificate reach a kube-apiserver older than 1.33 with its UID
// (the exchange refuses rather than drop it). Extras are not asserted here: the
// agent's JWTAuthenticator maps none (its certificates cannot carry them);
// the unit differential test (FuzzIdentityArrivesAsIssued) covers them.
func mustCarry(cfg testbed.Config, c identityCase, path string) bool {
	certificate := strings.Contains(path, "certificate") || path == "TokenCredentialRequest" || path == "pinniped proxy to the api"
	if n := cfg.KubeMinorNumber(); certificate && c.uid != "" && (cfg.Profile == testbed.ProfileManaged || (n > 0 && n < 33)) {
		return false
	}
	return true
}

func withoutAuthenticated(groups []string) []string {
	return slices.DeleteFunc(slices.Clone(groups), func(g string) bool { return g == user.AllAuthenticated })
}

// proxyVariant is how a client reaches the impersonation proxy, and so
// which hop the proxy takes to the API server.
type proxyVariant struct {
	name string
	h1   bool
	hop  upstreamHop
}

// upstreamHop is the kind of request, which decides the proxy's hop to the
// API server.
type upstreamHop int

const (
	// hopCreate: a SelfSubjectReview, a write, sent upstream over HTTP/2.
	hopCreate upstreamHop = iota
	// hopRead: GET /version, a read anyone may make, sent upstream over
	// HTTP/1.1 (the bed audits it for this test).
	hopRead
	// hopUpgrade: a SelfSubjectReview with the headers of a WebSocket
	// upgrade, sent upstream over HTTP/1.1.
	hopUpgrade
)

var proxyVariants = []proxyVariant{
	{name: "HTTP/2 read (HTTP/1.1 upstream)", h1: false, hop: hopRead},
	{name: "HTTP/1.1 read (HTTP/1.1 upstream)", h1: true, hop: hopRead},
	{name: "HTTP/2 create (HTTP/2 upstream)", h1: false, hop: hopCreate},
	{name: "HTTP/1.1 upgrade (HTTP/1.1 upstream)", h1: true, hop: hopUpgrade},
}

// endpoint is an HTTPS server of the cluster: the API server or the proxy.
type endpoint struct {
	url string
	ca  []byte
}

// clientAuth is how a request authenticates.
type clientAuth struct {
	token     string
	cert, key string // PEM
	h1        bool
}

func (a clientAuth) with(v proxyVariant) clientAuth { a.h1 = v.h1; return a }

func (e endpoint) client(t *testing.T, a clientAuth) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: !a.h1}
	if a.h1 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	if a.cert != "" {
		pair, err := tls.X509KeyPair([]byte(a.cert), []byte(a.key))
		if err != nil {
			t.Fatal(err)
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

type whoamiReply struct {
	code    int
	body    string
	auditID string
	proto   int
	// retryAfter is the Retry-After header, "" when absent.
	retryAfter string
}

// whoami POSTs a SelfSubjectReview; hopUpgrade adds the headers of a
// WebSocket upgrade, which the proxy forwards over its upgrade transport
// (the API server answers it as a plain create); hopRead GETs /version
// instead, whose audit event records the identity as well.
func (e endpoint) whoami(ctx context.Context, t *testing.T, a clientAuth, hop upstreamHop) whoamiReply {
	t.Helper()
	return postWhoAmI(ctx, t, e.client(t, a), e.url, a.token, hop)
}

func postWhoAmI(ctx context.Context, t *testing.T, c *http.Client, base, token string, hop upstreamHop) whoamiReply {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if hop == hopRead {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/version", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if hop != hopRead {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if hop == hopUpgrade {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	return whoamiReply{code: resp.StatusCode, body: string(raw), auditID: resp.Header.Get("Audit-Id"), proto: resp.ProtoMajor,
		retryAfter: resp.Header.Get("Retry-After")}
}

// request is one path's answer: an audit ID, or a refusal (401 or 403).
func (e endpoint) request(ctx context.Context, t *testing.T, path string, a clientAuth, hop upstreamHop) pathResult {
	t.Helper()
	r := e.whoami(ctx, t, a, hop)
	if hop == hopRead && r.code == http.StatusOK {
		r.code = http.StatusCreated // GET /version's success, as answer takes a create's
	}
	return answer(t, path, r)
}

func answer(t *testing.T, path string, r whoamiReply) pathResult {
	t.Helper()
	switch {
	case r.code == http.StatusCreated && r.auditID != "":
		return pathResult{path: path, auditID: r.auditID}
	case r.code == http.StatusUnauthorized || r.code == http.StatusForbidden:
		return pathResult{path: path, refused: fmt.Sprintf("HTTP %d %s", r.code, r.body)}
	}
	t.Fatalf("%s: HTTP %d (audit ID %q): %s", path, r.code, r.auditID, r.body)
	return pathResult{}
}

// tcr is a TokenCredentialRequest at e (the API server or the proxy) for
// the installation's authenticator: the credential the agent issued, or
// its message.
func (in installation) tcr(t *testing.T, e endpoint, token string) (cred proxyCredential, message string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"apiVersion": groupsuffix.GroupVersion(groupsuffix.Login, in.suffix), "kind": "TokenCredentialRequest",
		"spec": map[string]any{"token": token, "authenticator": map[string]any{
			"apiGroup": groupsuffix.Group(groupsuffix.Authentication, in.suffix), "kind": "JWTAuthenticator", "name": in.authenticator}},
	})
	resp, err := e.client(t, clientAuth{}).Post(e.url+"/apis/"+groupsuffix.GroupVersion(groupsuffix.Login, in.suffix)+"/tokencredentialrequests",
		"application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("TokenCredentialRequest at %s: %v", e.url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Status struct {
			Credential *struct {
				Cert  string `json:"clientCertificateData"`
				Key   string `json:"clientKeyData"`
				Token string `json:"token"`
			} `json:"credential"`
			Message *string `json:"message"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("TokenCredentialRequest at %s: HTTP %d %s", e.url, resp.StatusCode, raw)
	}
	if c := out.Status.Credential; c != nil {
		cred = proxyCredential{Cert: []byte(c.Cert), Key: []byte(c.Key), Token: c.Token}
	}
	if out.Status.Message != nil {
		message = *out.Status.Message
	}
	return cred, message
}

// identityKubeconfig is a kubeconfig with a context per identity case and
// each of vias, each a `pinniped login static` of the case's token: "api"
// at the API server (a certificate), "proxy" at the impersonation proxy
// (its token).
func identityKubeconfig(t *testing.T, pinniped string, endpoints map[string]endpoint, vias []string, mint func(identityCase) string) (string, []map[string]string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	var names []map[string]string
	for i, c := range identityCases {
		tok := mint(c)
		byVia := map[string]string{}
		for _, via := range vias {
			e := endpoints[via]
			name := fmt.Sprintf("id-%02d-%s", i, via)
			cfg.Clusters[name] = &clientcmdapi.Cluster{Server: e.url, CertificateAuthorityData: e.ca}
			cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
				APIVersion: "client.authentication.k8s.io/v1", Command: pinniped, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
				Args: []string{"login", "static", "--token=" + tok, "--enable-concierge", "--concierge-authenticator-type=jwt",
					"--concierge-authenticator-name=direct", "--concierge-endpoint=" + e.url,
					"--concierge-ca-bundle-data=" + base64.StdEncoding.EncodeToString(e.ca), "--credential-cache=none"},
			}}
			cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
			byVia[via] = name
		}
		names = append(names, byVia)
	}
	cfg.CurrentContext = names[0][vias[0]]
	path := filepath.Join(t.TempDir(), "identities.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path, names
}

// startDirectIssuer serves the issuer kube-apiserver itself trusts
// (testbed.DirectIssuer) for the rest of the test: its tokens reach the API
// server's own authenticator, with no exchange and no agent.
func startDirectIssuer(t *testing.T) *jwttest.Issuer {
	t.Helper()
	cfg := Bed.Config()
	certFile, keyFile := cfg.DirectIssuerTLS()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	bedCA, err := os.ReadFile(cfg.TestbedCAFile())
	if err != nil {
		t.Fatal(err)
	}
	iss := jwttest.NewAt(t, net.JoinHostPort(cfg.NodeIP, strconv.Itoa(cfg.DirectIssuerPort)),
		&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, bedCA)
	if iss.URL != cfg.DirectIssuer() {
		t.Fatalf("the issuer is at %s, kube-apiserver trusts %s", iss.URL, cfg.DirectIssuer())
	}
	return iss
}

// localProxyRequest asks through pinniped proxy's context name. A context
// whose login the agent refused answers 503 with the refusal (once its
// first attempt is over): that is the path's refusal.
func localProxyRequest(ctx context.Context, t *testing.T, proxied, stateDir, name, path string) pathResult {
	t.Helper()
	base, ca, secret := localProxyTarget(t, proxied, stateDir, name)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}
	// As client-go does (kubectl's requests), a 503 with Retry-After is
	// tried again, up to ten times: the context's credential is on its
	// way, e.g. a retry of a refused exchange that is refused again.
	r := postWhoAmI(ctx, t, c, base, secret, hopCreate)
	for try := 0; try < 10 && r.code == http.StatusServiceUnavailable && r.retryAfter != ""; try++ {
		wait, err := strconv.Atoi(r.retryAfter)
		if err != nil || wait < 0 {
			t.Fatalf("%s: Retry-After %q is not a number of seconds", path, r.retryAfter)
		}
		t.Logf("%s: HTTP 503 with Retry-After %s (%s); trying again as client-go would", path, r.retryAfter, r.body)
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", path, ctx.Err())
		case <-time.After(time.Duration(wait) * time.Second):
		}
		r = postWhoAmI(ctx, t, c, base, secret, hopCreate)
	}
	// A 503 without Retry-After is the context's last attempt, failed: the
	// answer's own message says whether the cluster refused it (the state
	// file is written a moment later, and may already show the next try).
	if r.code == http.StatusServiceUnavailable && r.retryAfter == "" {
		var st metav1.Status
		if err := json.Unmarshal([]byte(r.body), &st); err == nil && strings.Contains(st.Message, "could not get a credential") && strings.Contains(st.Message, "refused") {
			return pathResult{path: path, refused: st.Message}
		}
	}
	return answer(t, path, r)
}

// localProxyRefused: pinniped proxy's last attempt at c's credential was
// refused by the cluster (a login still under way, or one that failed for
// another reason, is not a refusal: the CSR strategy takes its time).
func localProxyRefused(c state.Context) bool {
	return c.State == "failed" && strings.Contains(c.Problem, "refused")
}

// readAuditUsers reads kube-apiserver's audit log once its events are
// written, and returns a lookup of the effective user by audit ID (the
// impersonated user when there is one).
func readAuditUsers(t *testing.T) func(auditID string) (seenUser, bool) {
	t.Helper()
	// The log is written when each response completes; give it a moment.
	time.Sleep(2 * time.Second)
	f, err := os.Open(Bed.Config().AuditLog())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	users := map[string]seenUser{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		var ev struct {
			AuditID          string    `json:"auditID"`
			Stage            string    `json:"stage"`
			User             seenUser  `json:"user"`
			ImpersonatedUser *seenUser `json:"impersonatedUser"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" {
			continue
		}
		u := ev.User
		if ev.ImpersonatedUser != nil {
			u = *ev.ImpersonatedUser
		}
		users[ev.AuditID] = u
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return func(id string) (seenUser, bool) {
		u, ok := users[id]
		return u, ok && id != ""
	}
}

func indentYAML(s, by string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n") + "\n"
}
