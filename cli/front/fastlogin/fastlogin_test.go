package fastlogin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/commands/login"
	"github.com/pinniped-kit/pinniped/cli/credstore"
	"github.com/pinniped-kit/pinniped/cli/front/fastlogin"
	"github.com/pinniped-kit/pinniped/cli/login/config"
)

const (
	issuerCA    = "-----BEGIN CERTIFICATE-----\naXNzdWVy\n-----END CERTIFICATE-----\n"
	execInfoFmt = `{"apiVersion":"client.authentication.k8s.io/%s","kind":"ExecCredential","spec":{"interactive":false,"cluster":{"server":"https://10.0.0.1:6443","certificate-authority-data":"Y2x1c3Rlcg=="}}}`
)

var env = fastlogin.Env{Getenv: os.Getenv, LookupEnv: os.LookupEnv}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// concierge CA: a real PEM certificate, as the engine validates it.
var conciergeCA = func() string {
	b, err := os.ReadFile("testdata/ca.pem")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func oidcArgs(extra ...string) []string {
	return append([]string{"login", "oidc", "--issuer=https://dex.example.com", "--client-id=pinniped-cli",
		"--scopes=openid,groups", "--ca-bundle-data=" + b64(issuerCA),
		"--enable-concierge", "--concierge-endpoint=https://10.0.0.1:6443", "--concierge-ca-bundle-data=" + b64(conciergeCA),
		"--concierge-authenticator-type=jwt", "--concierge-authenticator-name=dex", "--credential-cache=file"}, extra...)
}

func setup(t *testing.T, version string) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("KUBERNETES_EXEC_INFO", strings.Replace(execInfoFmt, "%s", version, 1))
}

// execCluster is the cluster in KUBERNETES_EXEC_INFO above.
var execCluster = config.Cluster{Server: "https://10.0.0.1:6443", CA: []byte("cluster")}

// keyed is a login whose cache key put uses.
type keyed interface {
	CredentialKey(config.Cluster) string
}

// put caches a credential under the key of login for the cluster kubectl
// names in the tests.
func put(t testing.TB, login keyed, expires time.Time) {
	t.Helper()
	key := login.CredentialKey(execCluster)
	store, _ := credstore.ForProcess().Open("file", nil)
	c := &credcache.Cache{Now: time.Now, Store: store}
	if err := c.Put(context.Background(), key, "test", credcache.Credential{ClientCertificateData: "CERT", ClientKeyData: "KEY", ExpirationTimestamp: expires}); err != nil {
		t.Fatal(err)
	}
}

// oidcInputs is the login oidcArgs asks for, written out by hand.
func oidcInputs() *config.OIDC {
	return &config.OIDC{Issuer: "https://dex.example.com", ClientID: "pinniped-cli", Scopes: []string{"openid", "groups"},
		CABundle: []byte(issuerCA), Concierge: &config.Concierge{Endpoint: "https://10.0.0.1:6443", APIGroupSuffix: "pinniped.dev",
			AuthenticatorType: "jwt", AuthenticatorName: "dex", CABundle: []byte(conciergeCA)}}
}

func answer(t *testing.T, args []string) (bool, string) {
	t.Helper()
	var out bytes.Buffer
	ok := fastlogin.Answer(args, env, &out)
	if !ok && out.Len() > 0 {
		t.Fatalf("no answer, but wrote %q", out.String())
	}
	return ok, out.String()
}

func TestCacheHitMissAndExpiry(t *testing.T) {
	setup(t, "v1")
	if ok, _ := answer(t, oidcArgs()); ok {
		t.Fatal("answered from an empty cache")
	}
	put(t, oidcInputs(), time.Now().Add(20*time.Second)) // inside the 30 s skew
	if ok, _ := answer(t, oidcArgs()); ok {
		t.Fatal("answered with a credential about to expire")
	}
	put(t, oidcInputs(), time.Now().Add(5*time.Minute))
	ok, out := answer(t, oidcArgs())
	var cred struct {
		APIVersion string `json:"apiVersion"`
		Status     struct {
			ClientCertificateData string `json:"clientCertificateData"`
			ExpirationTimestamp   string `json:"expirationTimestamp"`
		} `json:"status"`
	}
	if !ok || json.Unmarshal([]byte(out), &cred) != nil || cred.APIVersion != "client.authentication.k8s.io/v1" ||
		cred.Status.ClientCertificateData != "CERT" || cred.Status.ExpirationTimestamp == "" {
		t.Fatalf("cache hit: %v %s", ok, out)
	}
	// Flag order does not matter; what kubectl asks for does.
	args := oidcArgs()
	args[2], args[len(args)-1] = args[len(args)-1], args[2]
	if ok, _ := answer(t, args); !ok {
		t.Fatal("reordered flags missed the cache")
	}
	t.Setenv("KUBERNETES_EXEC_INFO", strings.Replace(execInfoFmt, "%s", "v1beta1", 1))
	if ok, out := answer(t, oidcArgs()); !ok || !strings.Contains(out, `"client.authentication.k8s.io/v1beta1"`) {
		t.Fatalf("v1beta1: %s", out)
	}

	// Whatever the engine would refuse or explain goes to the engine.
	for name, args := range map[string][]string{
		"help":           oidcArgs("--help"),
		"unknown flag":   oidcArgs("--nope"),
		"stray argument": oidcArgs("extra"),
		"bad flow":       oidcArgs("--flow=carrier-pigeon"),
		"http issuer":    oidcArgs("--issuer=http://dex.example.com"),
		"no cache":       oidcArgs("--credential-cache=none"),
		"other command":  {"version"},
		"login alone":    {"login"},
	} {
		if ok, _ := answer(t, args); ok {
			t.Errorf("%s: answered", name)
		}
	}
	t.Setenv("KUBERNETES_EXEC_INFO", `{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v9"}`)
	if ok, _ := answer(t, oidcArgs()); ok {
		t.Error("answered an exec info version the engine refuses")
	}
}

// TestEngineAgreesOnTheKey: the engine, given the same arguments, finds the
// credential the front finds, without trying to log in (there is no issuer).
func TestEngineAgreesOnTheKey(t *testing.T) {
	setup(t, "v1")
	put(t, oidcInputs(), time.Now().Add(5*time.Minute))
	var out, errOut bytes.Buffer
	cmd := login.NewCmdLogin(cmdutil.New(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, buildinfo.Info{}))
	cmd.SetArgs(oidcArgs()[1:])
	if err := cmd.ExecuteContext(context.Background()); err != nil || !strings.Contains(out.String(), `"clientCertificateData":"CERT"`) {
		t.Fatalf("the engine did not find the front's credential: %v\n%s\n%s", err, out.String(), errOut.String())
	}

	// login static, with the agent: same agreement.
	t.Setenv("MY_TOKEN", "s3cret")
	staticArgs := []string{"login", "static", "--token-env=MY_TOKEN", "--enable-concierge", "--concierge-endpoint=https://10.0.0.1:6443",
		"--concierge-ca-bundle-data=" + b64(conciergeCA), "--concierge-authenticator-type=webhook", "--concierge-authenticator-name=hook", "--credential-cache=file"}
	if ok, _ := answer(t, staticArgs); ok {
		t.Fatal("static: answered from an empty cache")
	}
	put(t, &config.Static{Token: "s3cret", Concierge: &config.Concierge{Endpoint: "https://10.0.0.1:6443", APIGroupSuffix: "pinniped.dev",
		AuthenticatorType: "webhook", AuthenticatorName: "hook", CABundle: []byte(conciergeCA)}}, time.Now().Add(5*time.Minute))
	if ok, out := answer(t, staticArgs); !ok || !strings.Contains(out, `"CERT"`) {
		t.Fatalf("static hit: %v %s", ok, out)
	}
	out.Reset()
	cmd = login.NewCmdLogin(cmdutil.New(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, buildinfo.Info{}))
	cmd.SetArgs(staticArgs[1:])
	if err := cmd.ExecuteContext(context.Background()); err != nil || !strings.Contains(out.String(), `"clientCertificateData":"CERT"`) {
		t.Fatalf("the engine did not find the front's static credential: %v\n%s", err, errOut.String())
	}
}

func TestStaticTokenWithoutAgent(t *testing.T) {
	setup(t, "v1beta1")
	t.Setenv("MY_TOKEN", "s3cret")
	ok, out := answer(t, []string{"login", "static", "--token-env=MY_TOKEN"})
	if !ok || !strings.Contains(out, `"token":"s3cret"`) || strings.Contains(out, "expirationTimestamp") {
		t.Fatalf("static token: %v %s", ok, out)
	}
	for name, args := range map[string][]string{
		"unset": {"login", "static", "--token-env=NOT_SET_ANYWHERE"},
		"none":  {"login", "static"},
	} {
		if ok, _ := answer(t, args); ok {
			t.Errorf("%s: answered; the engine must explain", name)
		}
	}
}

// BenchmarkAnswerFileHit is the work of a cache hit after start-up (flags,
// exec info, key, one file read, the answer); compare with the process
// start-up in make bench-login.
func BenchmarkAnswerFileHit(b *testing.B) {
	b.Setenv("XDG_CONFIG_HOME", b.TempDir())
	b.Setenv("KUBERNETES_EXEC_INFO", strings.Replace(execInfoFmt, "%s", "v1", 1))
	put(b, oidcInputs(), time.Now().Add(time.Hour))
	args := oidcArgs()
	for b.Loop() {
		if !fastlogin.Answer(args, env, io.Discard) {
			b.Fatal("miss")
		}
	}
}

// BenchmarkAnswer: the cached path's work after start-up. Its bytes per
// answer matter more than its nanoseconds: a fresh process page-faults on
// every heap page it first touches.
func BenchmarkAnswer(b *testing.B) {
	b.Setenv("XDG_CONFIG_HOME", b.TempDir())
	b.Setenv("KUBERNETES_EXEC_INFO", strings.Replace(execInfoFmt, "%s", "v1", 1))
	put(b, oidcInputs(), time.Now().Add(time.Hour))
	args := oidcArgs()
	b.ReportAllocs()
	for b.Loop() {
		if !fastlogin.Answer(args, env, io.Discard) {
			b.Fatal("no answer")
		}
	}
}

// TestUpstreamProvidersAndPasswordUsersNeverShare: two kubeconfigs on one
// Supervisor that differ only in the upstream identity provider (or a CI
// job's PINNIPED_USERNAME) log in as different people: a credential cached
// for one is never the answer for the other, in the front or the engine.
func TestUpstreamProvidersAndPasswordUsersNeverShare(t *testing.T) {
	setup(t, "v1")
	ldap := oidcArgs("--upstream-identity-provider-name=Corporate LDAP", "--upstream-identity-provider-type=ldap", "--upstream-identity-provider-flow=cli_password")
	in := oidcInputs()
	in.Upstream = config.Upstream{Name: "Corporate LDAP", Type: "ldap", Flow: "cli_password"}
	t.Setenv("PINNIPED_USERNAME", "alice")
	in.Username = "alice"
	put(t, in, time.Now().Add(5*time.Minute))
	if ok, _ := answer(t, ldap); !ok {
		t.Fatal("alice's own credential was not found")
	}
	var out, errOut bytes.Buffer
	cmd := login.NewCmdLogin(cmdutil.New(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, buildinfo.Info{}))
	cmd.SetArgs(ldap[1:])
	if err := cmd.ExecuteContext(context.Background()); err != nil || !strings.Contains(out.String(), `"clientCertificateData":"CERT"`) {
		t.Fatalf("the engine did not find the front's credential: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	for name, args := range map[string][]string{
		"another provider":      oidcArgs("--upstream-identity-provider-name=GitHub", "--upstream-identity-provider-type=github", "--upstream-identity-provider-flow=cli_password"),
		"same name, other type": oidcArgs("--upstream-identity-provider-name=Corporate LDAP", "--upstream-identity-provider-type=activedirectory", "--upstream-identity-provider-flow=cli_password"),
		"no provider":           oidcArgs(),
	} {
		if ok, _ := answer(t, args); ok {
			t.Errorf("%s: answered with Corporate LDAP's credential", name)
		}
	}
	t.Setenv("PINNIPED_USERNAME", "bob")
	if ok, _ := answer(t, ldap); ok {
		t.Fatal("bob got alice's credential")
	}
	// The environment's flow wins over the flag, as upstream, in the key too.
	t.Setenv("PINNIPED_USERNAME", "alice")
	t.Setenv("PINNIPED_UPSTREAM_IDENTITY_PROVIDER_FLOW", "browser_authcode")
	if ok, _ := answer(t, ldap); ok {
		t.Fatal("a browser login was answered with the password login's credential")
	}
}
