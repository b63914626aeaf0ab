package doctor

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/credstore"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
)

// idp is an OIDC provider (optionally a Pinniped Supervisor) whose every
// answer a test can change.
type idp struct {
	srv *httptest.Server
	ca  []byte
	mu  sync.Mutex
	// calledItself is the issuer its discovery names ("": its URL).
	calledItself string
	keys         []map[string]string
	// authorize answers an authorize request (nil: 302 to its login page).
	authorize  func(w http.ResponseWriter, r *http.Request)
	supervisor bool
	providers  []map[string]any
	skew       time.Duration
	// seen are the authorize requests' queries.
	seen []string
}

func newIDP(t *testing.T) *idp {
	p := &idp{keys: []map[string]string{{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "k1"}}}
	p.srv = quietTLSServer(p)
	t.Cleanup(p.srv.Close)
	p.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	return p
}

func (p *idp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Date", time.Now().Add(p.skew).UTC().Format(http.TimeFormat))
	u := p.srv.URL
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		issuer := u
		if p.calledItself != "" {
			issuer = p.calledItself
		}
		doc := map[string]any{"issuer": issuer, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
			"jwks_uri": u + "/jwks", "scopes_supported": []string{"openid", "offline_access", "email", "groups"}}
		if p.supervisor {
			doc["discovery.supervisor.pinniped.dev/v1alpha1"] = map[string]string{"pinniped_identity_providers_endpoint": u + "/v1alpha1/pinniped_identity_providers"}
			doc["response_modes_supported"] = []string{"query", "form_post"}
		}
		_ = json.NewEncoder(w).Encode(doc)
	case "/jwks":
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": p.keys})
	case "/authorize":
		p.seen = append(p.seen, r.URL.RawQuery)
		if p.authorize != nil {
			p.authorize(w, r)
			return
		}
		http.Redirect(w, r, u+"/login", http.StatusFound)
	case "/v1alpha1/pinniped_identity_providers":
		_ = json.NewEncoder(w).Encode(map[string]any{"pinniped_identity_providers": p.providers})
	default:
		http.NotFound(w, r)
	}
}

// apiServer is a cluster's API server with the agent's APIs, answering
// what a test sets; it takes one bearer token.
type apiServer struct {
	srv   *httptest.Server
	ca    []byte
	token string
	mu    sync.Mutex
	skew  time.Duration
	// tcr answers TokenCredentialRequests (0: the agent's refusal).
	tcr                  int
	unavailable          bool
	ciForbidden          bool
	apiServicesForbidden bool
	strategies           []map[string]any
	authPhase            string
	authConditions       []map[string]any
	authIssuer           string
	authAudience         string
	noAuthenticator      bool
	rules                []map[string]any
	requests             []string
	// adminRequests are those that carried the administrator's token.
	adminRequests   []string
	unauthenticated bool
	// incomplete: the rules review says its list is incomplete (a webhook authorizer).
	incomplete bool
}

func newAPIServer(t *testing.T, issuer string) *apiServer {
	a := &apiServer{token: "cached-cluster-token-0123456789", authPhase: "Ready", authIssuer: issuer, authAudience: "pinniped-cli",
		rules: []map[string]any{
			{"verbs": []string{"create"}, "apiGroups": []string{"authorization.k8s.io"}, "resources": []string{"selfsubjectrulesreviews"}},
			{"verbs": []string{"get", "list", "watch"}, "apiGroups": []string{""}, "resources": []string{"pods", "configmaps"}},
		}}
	a.srv = quietTLSServer(a)
	t.Cleanup(a.srv.Close)
	a.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.srv.Certificate().Raw})
	return a
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, r.Method+" "+r.URL.Path)
	w.Header().Set("Date", time.Now().Add(a.skew).UTC().Format(http.TimeFormat))
	w.Header().Set("Content-Type", "application/json")
	send := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	status := func(code int, reason, msg string) {
		send(code, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": msg, "code": code})
	}
	p := r.URL.Path
	switch p {
	case "/version":
		send(200, map[string]string{"gitVersion": "v1.34.4"})
		return
	case "/apis/login.concierge.pinniped.dev/v1alpha1/tokencredentialrequests":
		switch a.tcr {
		case 0:
			send(201, map[string]any{"kind": "TokenCredentialRequest", "status": map[string]any{"message": "authentication failed"}})
		default:
			status(a.tcr, "NotFound", "the server could not find the requested resource")
		}
		return
	}
	admin := r.Header.Get("Authorization") == "Bearer "+adminToken
	if admin {
		a.adminRequests = append(a.adminRequests, r.Method+" "+r.URL.Path)
	}
	if !admin && (a.unauthenticated || r.Header.Get("Authorization") != "Bearer "+a.token) {
		status(401, "Unauthorized", "Unauthorized")
		return
	}
	switch {
	case strings.HasPrefix(p, "/apis/apiregistration.k8s.io/v1/apiservices/") && a.apiServicesForbidden && !admin:
		status(403, "Forbidden", `apiservices.apiregistration.k8s.io is forbidden: User "alice" cannot get resource "apiservices"`)
	case strings.HasPrefix(p, "/apis/apiregistration.k8s.io/v1/apiservices/"):
		name := strings.TrimPrefix(p, "/apis/apiregistration.k8s.io/v1/apiservices/")
		cond := map[string]any{"type": "Available", "status": "True", "reason": "Passed", "message": "all checks passed", "lastTransitionTime": "2026-11-25T00:00:00Z"}
		if a.unavailable {
			cond["status"], cond["reason"], cond["message"] = "False", "MissingEndpoints", "endpoints for service/pinniped-agent-api have no addresses"
		}
		send(200, map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": name},
			"status": map[string]any{"conditions": []any{cond}}})
	case p == "/apis/config.concierge.pinniped.dev/v1alpha1/credentialissuers":
		if a.ciForbidden && !admin {
			status(403, "Forbidden", `credentialissuers.config.concierge.pinniped.dev is forbidden: User "alice" cannot list resource "credentialissuers"`)
			return
		}
		send(200, map[string]any{"apiVersion": "config.concierge.pinniped.dev/v1alpha1", "kind": "CredentialIssuerList", "metadata": map[string]any{},
			"items": []any{map[string]any{"apiVersion": "config.concierge.pinniped.dev/v1alpha1", "kind": "CredentialIssuer",
				"metadata": map[string]any{"name": "pinniped-config"}, "spec": map[string]any{}, "status": map[string]any{"strategies": a.strategies}}}})
	case strings.HasPrefix(p, "/apis/authentication.concierge.pinniped.dev/v1alpha1/webhookauthenticators/"):
		send(200, map[string]any{"apiVersion": "authentication.concierge.pinniped.dev/v1alpha1", "kind": "WebhookAuthenticator",
			"metadata": map[string]any{"name": "hook"}, "spec": map[string]any{"endpoint": "https://hook.example.com"},
			"status": map[string]any{"phase": a.authPhase, "conditions": a.authConditions}})
	case strings.HasPrefix(p, "/apis/authentication.concierge.pinniped.dev/v1alpha1/jwtauthenticators/"):
		if a.noAuthenticator {
			status(404, "NotFound", `jwtauthenticators.authentication.concierge.pinniped.dev "dex" not found`)
			return
		}
		send(200, map[string]any{"apiVersion": "authentication.concierge.pinniped.dev/v1alpha1", "kind": "JWTAuthenticator",
			"metadata": map[string]any{"name": "dex"}, "spec": map[string]any{"issuer": a.authIssuer, "audience": a.authAudience},
			"status": map[string]any{"phase": a.authPhase, "conditions": a.authConditions}})
	case p == "/apis/identity.concierge.pinniped.dev/v1alpha1/whoamirequests":
		send(201, map[string]any{"apiVersion": "identity.concierge.pinniped.dev/v1alpha1", "kind": "WhoAmIRequest",
			"status": map[string]any{"kubernetesUserInfo": map[string]any{"user": map[string]any{"username": "alice@example.com", "groups": []string{"devs", "system:authenticated"}}}}})
	case p == "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews":
		body, _ := io.ReadAll(r.Body)
		var review map[string]any
		_ = json.Unmarshal(body, &review)
		review["status"] = map[string]any{"resourceRules": a.rules, "nonResourceRules": []any{}, "incomplete": a.incomplete}
		send(201, review)
	default:
		status(404, "NotFound", "the server could not find the requested resource")
	}
}

// bed is one user's machine: a kubeconfig whose context logs in at the
// idp and exchanges at the apiServer, pinniped and pinniped-engine in a
// directory, a file cache, and the adapters doctor is given.
type bed struct {
	t          *testing.T
	idp        *idp
	api        *apiServer
	dir        string
	front      string
	kubeconfig string
	env        map[string]string
	args       []string
	// user replaces the context's user entry, when set; others are more
	// users in the file.
	user   *clientcmdapi.AuthInfo
	others map[string]*clientcmdapi.AuthInfo
	// clusterCA is the kubeconfig's CA for the cluster (default: the API server's).
	clusterCA []byte
	// command is the exec entry's command (default "pinniped", on $PATH).
	command string
	builds  map[string]Build
	self    Build
	backend credstore.Backend
	cached  *credcache.Credential
	f       *cmdutil.Factory
	now     func() time.Time
	// server replaces the cluster's server in the kubeconfig; insecure
	// sets insecure-skip-tls-verify (and no CA).
	server   string
	insecure bool
	// tweak changes doctor's adapters after the bed's, just before it runs.
	tweak func(d *Doctor)
}

const clientSecret = "client-secret-do-not-print-4f2a"

// adminToken is an administrator's: the API server lets it read everything.
const adminToken = "admin-token-do-not-print-9c1e"

// adminKubeconfig is an administrator's kubeconfig for the bed's cluster.
func (b *bed) adminKubeconfig() string {
	b.t.Helper()
	cfg := clientcmdapi.Config{
		CurrentContext: "admin",
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: b.api.srv.URL, CertificateAuthorityData: b.api.ca}},
		Contexts:       map[string]*clientcmdapi.Context{"admin": {Cluster: "c", AuthInfo: "admin"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {Token: adminToken}},
	}
	path := filepath.Join(b.dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		b.t.Fatal(err)
	}
	return path
}

func newBed(t *testing.T) *bed {
	b := &bed{t: t, idp: newIDP(t), dir: t.TempDir()}
	b.api = newAPIServer(t, b.idp.srv.URL)
	b.api.strategies = []map[string]any{{"type": "KubeClusterSigningCertificate", "status": "Success", "reason": "FetchedKey", "message": "key fetched",
		"lastUpdateTime": "2026-11-25T00:00:00Z", "frontend": map[string]any{"type": "TokenCredentialRequestAPI",
			"tokenCredentialRequestInfo": map[string]any{"server": b.api.srv.URL, "certificateAuthorityData": base64.StdEncoding.EncodeToString(b.api.ca)}}}}
	bin := filepath.Join(b.dir, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	b.front = filepath.Join(bin, "pinniped")
	for _, name := range []string{"pinniped", "pinniped-engine"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!"), 0o700); err != nil { //nolint:gosec // a test binary
			t.Fatal(err)
		}
	}
	build := Build{Version: "v0.9.0", Revision: "0123456789abcdef"}
	b.builds = map[string]Build{"pinniped": build, "pinniped-engine": build}
	b.self = build
	b.backend = credstore.Backend{Keyring: true, Store: "OS keyring"}
	b.env = map[string]string{"XDG_CONFIG_HOME": filepath.Join(b.dir, "config")}
	b.args = []string{"login", "oidc", "--issuer=" + b.idp.srv.URL, "--client-id=pinniped-cli", "--client-secret=" + clientSecret,
		"--ca-bundle-data=" + base64.StdEncoding.EncodeToString(b.idp.ca), "--enable-concierge",
		"--concierge-endpoint=" + b.api.srv.URL, "--concierge-ca-bundle-data=" + base64.StdEncoding.EncodeToString(b.api.ca),
		"--concierge-authenticator-type=jwt", "--concierge-authenticator-name=dex", "--credential-cache=keyring"}
	b.cached = &credcache.Credential{Token: b.api.token, ExpirationTimestamp: time.Now().Add(5 * time.Minute)}
	b.now = time.Now
	return b
}

// write writes the kubeconfig and caches the credential (when set) under
// the key a login would use.
func (b *bed) write() {
	t := b.t
	user := b.user
	if user == nil {
		command := b.command
		if command == "" {
			command = "pinniped"
		}
		user = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: command,
			Args: b.args, InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode, ProvideClusterInfo: true}}
	}
	ca := b.clusterCA
	if ca == nil {
		ca = b.api.ca
	}
	server := b.server
	if server == "" {
		server = b.api.srv.URL
	}
	cluster := &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	if b.insecure {
		cluster.CertificateAuthorityData, cluster.InsecureSkipTLSVerify = nil, true
	}
	cfg := clientcmdapi.Config{
		CurrentContext: "dev",
		Clusters:       map[string]*clientcmdapi.Cluster{"dev-cluster": cluster},
		Contexts:       map[string]*clientcmdapi.Context{"dev": {Cluster: "dev-cluster", AuthInfo: "dev-user"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"dev-user": user},
	}
	for name, u := range b.others {
		cfg.AuthInfos[name] = u
	}
	b.kubeconfig = filepath.Join(b.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(cfg, b.kubeconfig); err != nil {
		t.Fatal(err)
	}
	b.f = cmdutil.Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, b.env)
	if b.cached == nil || user.Exec == nil || len(user.Exec.Args) < 2 {
		return
	}
	kc := config.Cluster{Server: server, CA: cluster.CertificateAuthorityData}
	var key, mode string
	switch user.Exec.Args[1] {
	case "oidc":
		c, err := flagset.ParseOIDC(user.Exec.Args[2:], b.f.Getenv)
		if err != nil {
			return
		}
		key, mode = c.CredentialKey(kc), c.CredentialCache
	case "static":
		c, err := flagset.ParseStatic(user.Exec.Args[2:], b.f.LookupEnv)
		if err != nil {
			return
		}
		key, mode = c.CredentialKey(kc), c.CredentialCache
	}
	store, err := b.f.Caches.Open(mode, io.Discard)
	if err != nil || store == nil {
		return
	}
	if err := (&credcache.Cache{Now: time.Now, Store: store}).Put(context.Background(), key, "test", *b.cached); err != nil {
		t.Fatal(err)
	}
}

// adapters are the bed's world, for doctor.
func (b *bed) adapters(d *Doctor) {
	d.f.Now = b.now
	d.LookPath = func(name string) (string, error) {
		if name == "pinniped" {
			return b.front, nil
		}
		return "", os.ErrNotExist
	}
	d.GOOS = "linux"
	d.ReadBuild = func(path string) (Build, error) { return b.builds[filepath.Base(path)], nil }
	d.Self = func() (Build, error) { return b.self, nil }
	d.f.Caches = probed{Caches: d.f.Caches, backend: b.backend}
	d.f.DynamicFor = func(cfg *rest.Config) (dynamic.Interface, error) { return dynamic.NewForConfig(cfg) }
}

// probed are the bed's caches, with the backend the bed says a probe finds.
type probed struct {
	cmdutil.Caches
	backend credstore.Backend
}

func (p probed) Probe(context.Context, string) (credstore.Backend, error) { return p.backend, nil }

// run runs `pinniped doctor` on the bed with args; it returns stdout and
// the command's error.
func (b *bed) run(args ...string) (string, error) {
	b.write()
	var out bytes.Buffer
	b.f.IO.Out = &out
	cmd := NewCmdDoctor(b.f, func(ctx context.Context, o *Options) error {
		b.adapters(o.Doctor)
		if b.tweak != nil {
			b.tweak(o.Doctor)
		}
		return o.Run(ctx)
	})
	cmd.SetArgs(append([]string{"--kubeconfig=" + b.kubeconfig, "--timeout=5s"}, args...))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// report runs doctor with -o json and reads the report back.
func (b *bed) report(args ...string) *Report {
	b.t.Helper()
	out, _ := b.run(append([]string{"-o", "json"}, args...)...)
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		b.t.Fatalf("%v\n%s", err, out)
	}
	return &r
}

// want asserts a check's status and that its fix (or, for OK and SKIP,
// detail) holds each of subs.
func want(t *testing.T, r *Report, name string, status Status, subs ...string) {
	t.Helper()
	c := r.Check(name)
	if c == nil {
		t.Fatalf("no check %s", name)
	}
	text := c.Detail
	if status == Warn || status == Fail {
		text = c.Fix
	}
	if c.Status != status {
		t.Errorf("%s: %s (%s | %s), want %s", name, c.Status, c.Detail, c.Fix, status)
		return
	}
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%s: %q lacks %q", name, text, s)
		}
	}
}

func osRemove(p string) error { return os.Remove(p) }

// otherCA is a CA that signed none of the bed's servers (httptest's
// servers all share one certificate).
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// shortLived serves h with a certificate for 127.0.0.1 that ends after
// life, signed by the CA it returns.
func shortLived(t *testing.T, h http.Handler, life time.Duration) (*httptest.Server, []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "short-lived CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour * 365), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(life), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

// moveIDP serves the bed's provider from srv (trusted through ca) instead.
func (b *bed) moveIDP(srv *httptest.Server, ca []byte) {
	b.idp.srv, b.idp.ca = srv, ca
	b.api.authIssuer = srv.URL
	b.args = replaceArg(replaceArg(b.args, "--issuer=", srv.URL), "--ca-bundle-data=", base64.StdEncoding.EncodeToString(ca))
}

// quietTLSServer is httptest's, without the log lines of the handshakes
// the tests make fail on purpose.
func quietTLSServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	return srv
}
