//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxyconfig"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/secretca"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/tokenkeys"
	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// proxyCredential is what an impersonation proxy's own
// TokenCredentialRequest returned: a client certificate and its key (PEM),
// or a bearer token the agent signed for its proxy.
type proxyCredential struct {
	Cert, Key []byte
	Token     string
}

// proxyAuth is how a test client authenticates at the proxy: with a client
// certificate, or with a bearer token in every request.
type proxyAuth struct {
	name  string
	cert  *tls.Certificate
	token string
}

func certAuth(pair tls.Certificate) proxyAuth { return proxyAuth{name: "certificate", cert: &pair} }
func tokenAuth(tok string) proxyAuth          { return proxyAuth{name: "token", token: tok} }

// certificates is what the client presents in the TLS handshake.
func (a proxyAuth) certificates() []tls.Certificate {
	if a.cert == nil {
		return nil
	}
	return []tls.Certificate{*a.cert}
}

// client is an HTTP client of the proxy at strategy that authenticates
// with a; a request's own Authorization header wins over a's token.
func (a proxyAuth) client(strategy proxyStrategy) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(strategy.CA)
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: a.certificates(), MinVersion: tls.VersionTLS12}}
	if a.token != "" {
		rt = bearerTransport{base: rt, token: a.token}
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: rt}
}

// bearerTransport sends token unless the request has an Authorization
// header of its own.
type bearerTransport struct {
	base  http.RoundTripper
	token string
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, set := r.Header["Authorization"]; set {
		return b.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// kubeClient is a clientset with the installation's admin rights.
func (in installation) kubeClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	if in.kubeconfig == "" {
		return Client(t)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", in.kubeconfig)
	if err != nil {
		t.Fatalf("%s: %v", in.name, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("%s: clientset: %v", in.name, err)
	}
	return cs
}

// secret reads one of the installation's Secrets as admin.
func (in installation) secret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s, err := in.kubeClient(t).CoreV1().Secrets(in.namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: read the Secret %s/%s: %v", in.name, in.namespace, name, err)
	}
	return s
}

// signerCert is a client certificate for username and groups at the
// installation's proxy, issued with the proxy's own signer CA (read as
// admin). A client certificate still works at the proxy: upstream
// Pinniped's CLI and credentials cached before tokens get one.
func signerCert(t *testing.T, in installation, username string, groups []string) tls.Certificate {
	t.Helper()
	cred := signerCredential(t, in, username, "", groups)
	pair, err := tls.X509KeyPair(cred.Cert, cred.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// signerCredential is signerCert's certificate, with a UID, in PEM.
func signerCredential(t *testing.T, in installation, username, uid string, groups []string) proxyCredential {
	t.Helper()
	ca, _, err := secretca.Parse(in.secret(t, proxyconfig.SignerSecret), time.Now)
	if err != nil {
		t.Fatalf("%s: the proxy's signer: %v", in.name, err)
	}
	issued, err := ca.IssueClientCert(username, uid, groups, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return proxyCredential{Cert: issued.CertPEM, Key: issued.KeyPEM}
}

// whoamiWithProxyCredential asks the API server through the proxy at
// server (trusting caFile) who cred is.
func whoamiWithProxyCredential(t *testing.T, cred proxyCredential, server, caFile string) userInfo {
	t.Helper()
	if cred.Token == "" {
		return whoamiWithCertAt(t, exchangedCredential{Cert: string(cred.Cert), Key: string(cred.Key)}, server, caFile)
	}
	out := Run(t, []string{"KUBECONFIG=/dev/null"}, "kubectl", "--server="+server,
		"--certificate-authority="+caFile, "--token="+cred.Token, "auth", "whoami", "-o", "json")
	var review struct {
		Status struct {
			UserInfo userInfo `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &review); err != nil {
		t.Fatalf("kubectl auth whoami: %v\n%s", err, out)
	}
	return review.Status.UserInfo
}

// proxyTokenKeys reads the installation's proxy token keys as admin, and
// the audience its tokens name.
func (in installation) proxyTokenKeys(t *testing.T) (*proxytoken.KeySet, proxytoken.Audience) {
	t.Helper()
	ks, installID, err := tokenkeys.Parse(in.secret(t, proxyconfig.TokenKeySecret), time.Now())
	if err != nil {
		t.Fatalf("%s: the proxy token keys: %v", in.name, err)
	}
	return ks, proxytoken.ForInstall(installID)
}

// proxyTokenWait is how long the leader may take to make the token keys
// and promote the first one (a minute after it made it), and the replicas
// to load it.
const proxyTokenWait = 3 * time.Minute

// waitProxyToken exchanges idToken at the installation's proxy until it
// returns a token rather than a certificate (its fallback until a key
// signs), and returns the token.
func (in installation) waitProxyToken(t *testing.T, strategy proxyStrategy, idToken string) string {
	t.Helper()
	start := time.Now()
	var tok string
	var last proxyCredential
	ctx, cancel := context.WithTimeout(context.Background(), proxyTokenWait)
	defer cancel()
	for {
		last = in.proxyExchange(t, strategy, idToken)
		if last.Token != "" {
			tok = last.Token
			break
		}
		select {
		case <-ctx.Done():
			keys := "missing"
			if s, err := in.kubeClient(t).CoreV1().Secrets(in.namespace).Get(context.Background(), proxyconfig.TokenKeySecret, metav1.GetOptions{}); err == nil {
				keys = "without a signing key yet"
				if _, ok := s.Data[tokenkeys.SigningKey]; ok {
					keys = "with a signing key (the replicas did not load it)"
				}
			}
			t.Fatalf("%s: the proxy's TokenCredentialRequest still returns a certificate, not a token, after %v: the Secret %s/%s is %s; "+
				"the leader makes it once every agent pod runs one version and its first key signs a minute later (see the agent's log)",
				in.name, proxyTokenWait, in.namespace, proxyconfig.TokenKeySecret, keys)
		case <-time.After(3 * time.Second):
		}
	}
	if !proxytoken.Ours(tok) {
		t.Fatalf("%s: the proxy's exchange returned a token that is not a proxy token (typ %q expected)", in.name, proxytoken.Type)
	}
	t.Logf("%s: the proxy hands out tokens (after %v)", in.name, time.Since(start).Round(time.Second))
	return tok
}

// tokenJTI reads a JWT's jti without checking anything.
func tokenJTI(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatal("not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("JWT payload: %v", err)
	}
	var c struct {
		JTI string `json:"jti"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.JTI == "" {
		t.Fatalf("JWT without a jti (%v)", err)
	}
	return c.JTI
}

// tokenReviewCount is how many TokenReviews kube-apiserver has answered
// (its apiserver_request_total, all codes).
func tokenReviewCount(t *testing.T) float64 {
	t.Helper()
	out := Kubectl(t, "get", "--raw", "/metrics")
	var n float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "apiserver_request_total{") || !strings.Contains(l, `resource="tokenreviews"`) {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("kube-apiserver metric line %q: %v", l, err)
		}
		n, found = n+v, true
	}
	if !found {
		// None yet is possible on a fresh bed; ServiceAccount tokens through
		// the proxy make some before this is called.
		t.Log("kube-apiserver has counted no TokenReviews yet")
	}
	return n
}

// proxyGet sends GET path to the proxy at strategy with only the given
// Authorization header, and returns the status code.
func proxyGet(t *testing.T, strategy proxyStrategy, path, authorization string) int {
	t.Helper()
	c := proxyAuth{}.client(strategy)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, strategy.Endpoint+path, nil)
	req.Header.Set("Authorization", authorization)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s through the proxy: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// refusedAsProxyToken sends tok to our proxy on a path no other request
// uses, wants 401, and reads in the agents' log that the proxy decided it
// as one of its own tokens: the replica that answered wrote "refused a
// proxy token" (for reason) right before its audit line for the path.
// (A token sent to TokenReview is logged otherwise, or not at all.)
func refusedAsProxyToken(t *testing.T, strategy proxyStrategy, name, tok, reason string) {
	t.Helper()
	path := "/api/v1/namespaces/proxy-token-" + randomHex(6)
	if code := proxyGet(t, strategy, path, "Bearer "+tok); code != http.StatusUnauthorized {
		t.Errorf("%s: HTTP %d, want 401", name, code)
		return
	}
	Eventually(t, 30*time.Second, name+": the proxy's log of the refusal", func(context.Context) error {
		out, err := RunE(nil, "kubectl", "-n", ourInstall.namespace, "logs", "-l", ourInstall.selector, "--tail=-1", "--prefix")
		if err != nil {
			return err
		}
		// Per pod, the reason of the last proxy token refusal since its
		// last audit line of a proxied request.
		refusal := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			pod, body, ok := strings.Cut(line, "] ")
			if !ok {
				continue
			}
			var l map[string]any
			if json.Unmarshal([]byte(body), &l) != nil {
				continue
			}
			if l["msg"] == "refused a proxy token" {
				refusal[pod] = fmt.Sprint(l["reason"])
				continue
			}
			if l["proxy"] != true {
				continue
			}
			if l["path"] != path {
				delete(refusal, pod)
				continue
			}
			got, ok := refusal[pod]
			switch {
			case fmt.Sprint(l["code"]) != "401" || l["authentication"] != "refused":
				t.Errorf("%s: the proxy's audit line says code %v, authentication %v", name, l["code"], l["authentication"])
			case !ok:
				t.Errorf("%s: the proxy refused the request without deciding the token as its own (no \"refused a proxy token\" line before its audit line)", name)
			case got != reason:
				t.Errorf("%s: the proxy refused the token as %q, want %q", name, got, reason)
			}
			return nil
		}
		return errors.New("no audit line for the request yet")
	})
}

// testProxyTokens: the proxy's own tokens work end to end, and those it
// must refuse are refused by the proxy itself, never sent to TokenReview:
// one that expired, one with our claims signed by another key, and one
// that another installation's proxy issued.
func testProxyTokens(t *testing.T, pinniped string, strategy proxyStrategy, idToken string) {
	alice := testbed.DexUsers[0]
	ks, aud := ourInstall.proxyTokenKeys(t)
	if ks.Signing == nil {
		t.Fatal("the proxy hands out tokens, but its key Secret has no signing key")
	}
	u := &user.DefaultInfo{Name: alice.Email, Groups: []string{"developers"}}
	mint := func(k *proxytoken.Key, now time.Time) string {
		t.Helper()
		tok, _, _, err := proxytoken.Sign(k, aud, u, time.Minute, now)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	whoamiAs := func(s proxyStrategy, tok string) (int, string) {
		t.Helper()
		c := tokenAuth(tok).client(s)
		resp, err := c.Post(s.Endpoint+"/apis/authentication.k8s.io/v1/selfsubjectreviews", "application/json",
			strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		if err != nil {
			t.Fatalf("POST selfsubjectreviews through the proxy: %v", err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var r selfSubjectReview
		_ = json.Unmarshal(raw, &r)
		return resp.StatusCode, r.Status.UserInfo.Username
	}
	// The minting is right: a token signed now with the real key lets alice
	// in, so the refusals below are for what each case changes.
	if code, who := whoamiAs(strategy, mint(ks.Signing, time.Now())); code != http.StatusCreated || who != alice.Email {
		t.Fatalf("a token minted with the proxy's own signing key: HTTP %d as %q, want 201 as %s", code, who, alice.Email)
	}

	expired := mint(ks.Signing, time.Now().Add(-time.Hour))
	fresh, err := proxytoken.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	forged := mint(fresh, time.Now())

	// Another installation of this build, under another API group suffix:
	// its proxy's token names its own installation and key.
	other := benchInstallations(t, pinniped)[1]
	otherStrategy := other.waitProxyStrategy(t, other.name+"'s proxy is advertised", proxySucceeds)
	theirs := other.waitProxyToken(t, otherStrategy, idToken)
	if code, who := whoamiAs(otherStrategy, theirs); code != http.StatusCreated || who != alice.Email {
		t.Fatalf("%s's token at its own proxy: HTTP %d as %q, want 201 as %s", other.name, code, who, alice.Email)
	}

	before := tokenReviewCount(t)
	const invalid = "invalid (malformed, unknown key, bad signature or claims)"
	refusedAsProxyToken(t, strategy, "an expired token signed with the real key", expired, "expired")
	refusedAsProxyToken(t, strategy, "our claims signed by another key", forged, invalid)
	refusedAsProxyToken(t, strategy, "a token from "+other.name+"'s proxy", theirs, invalid)
	if after := tokenReviewCount(t); after != before {
		t.Errorf("kube-apiserver answered %v TokenReviews while the proxy refused its own kind of tokens, want none", after-before)
	}
	// The check above can see a TokenReview: a bearer token not in our
	// format is sent to one.
	if code := proxyGet(t, strategy, "/api/v1/namespaces/proxy-token-control", "Bearer not-a-proxy-token-"+randomHex(8)); code != http.StatusUnauthorized {
		t.Errorf("a bearer token unknown to the API server: HTTP %d, want 401", code)
	}
	if after := tokenReviewCount(t); after <= before {
		t.Errorf("kube-apiserver counted no TokenReview for a bearer token the proxy must send to one: the check above cannot see them")
	}
}

// execCredentialToken runs the exec plugin of kubeconfig as kubectl does
// (with the cluster in KUBERNETES_EXEC_INFO, so the same credential cache
// entry) and returns the token of its ExecCredential, failing unless it is
// a proxy token and nothing else.
func execCredentialToken(t *testing.T, pinniped, kubeconfig string, env []string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	if cluster == nil {
		t.Fatalf("%s has no cluster", kubeconfig)
	}
	info, _ := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"spec": map[string]any{"interactive": false, "cluster": map[string]any{"server": cluster.Server, "certificate-authority-data": cluster.CertificateAuthorityData}}})
	out := Run(t, append(slices.Clone(env), "KUBERNETES_EXEC_INFO="+string(info)), pinniped, loginArgs(t, kubeconfig)...)
	var cred struct {
		Kind   string `json:"kind"`
		Status struct {
			Token string `json:"token"`
			Cert  string `json:"clientCertificateData"`
			Key   string `json:"clientKeyData"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &cred); err != nil || cred.Kind != "ExecCredential" {
		t.Fatalf("the exec plugin printed no ExecCredential (%v)", err)
	}
	if cred.Status.Cert != "" || cred.Status.Key != "" || !proxytoken.Ours(cred.Status.Token) {
		t.Fatalf("the exec plugin's credential: certificate %t, key %t, proxy token %t; want only a proxy token",
			cred.Status.Cert != "", cred.Status.Key != "", proxytoken.Ours(cred.Status.Token))
	}
	return cred.Status.Token
}
