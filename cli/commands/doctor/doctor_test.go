package doctor

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/cli/credstore"
)

func names(r *Report) []string {
	var out []string
	for _, c := range r.Checks {
		out = append(out, c.Name)
	}
	return out
}

// TestAllGood: a healthy chain, logged in, through a Supervisor with an
// impersonation proxy: every check OK, in the documented order.
func TestAllGood(t *testing.T) {
	b := newBed(t)
	b.idp.supervisor = true
	b.idp.providers = []map[string]any{{"name": "corp-ldap", "type": "ldap", "flows": []string{"cli_password"}},
		{"name": "dex", "type": "oidc", "flows": []string{"browser_authcode"}}}
	// No --upstream-identity-provider-type: the login's default (oidc) is sent.
	b.args = append(b.args, "--upstream-identity-provider-name=dex")
	// The proxy is advertised at the bed's API server, with its CA.
	b.api.strategies = append(b.api.strategies, map[string]any{"type": "ImpersonationProxy", "status": "Success", "reason": "Listening",
		"message": "listening", "lastUpdateTime": "2026-11-25T00:00:00Z", "frontend": map[string]any{"type": "ImpersonationProxy",
			"impersonationProxyInfo": map[string]any{"endpoint": b.api.srv.URL, "certificateAuthorityData": base64.StdEncoding.EncodeToString(b.api.ca)}}})
	out, err := b.run()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r := b.report()
	if got := names(r); !slices.Equal(got, names(&Report{Checks: resultsFor(checks)})) {
		t.Errorf("checks %v", got)
	}
	for _, c := range r.Checks {
		if c.Status != OK {
			t.Errorf("%s: %s %s %s", c.Name, c.Status, c.Detail, c.Fix)
		}
	}
	if r.Context != "dev" {
		t.Errorf("context %q", r.Context)
	}
	want(t, r, "exec.front", OK, b.front)
	want(t, r, "exec.versions", OK, "v0.9.0", "commit 0123456789ab")
	want(t, r, "cache.credential", OK, "a token", "valid until")
	want(t, r, "issuer.discovery", OK, "Pinniped Supervisor")
	want(t, r, "issuer.upstream", OK, `"dex"`)
	want(t, r, "agent.api", OK, "refused a junk token")
	want(t, r, "agent.credentialissuer", OK, "KubeClusterSigningCertificate Success/FetchedKey", "ImpersonationProxy Success/Listening")
	want(t, r, "agent.proxy", OK, "certificate trusted")
	want(t, r, "you.identity", OK, "alice@example.com", "devs")
	want(t, r, "you.permissions", OK, "in namespace default", "list pods: yes", "create pods: no", "cluster-admin-like (*): no")
	// The authorize request is the login's: loopback redirect, PKCE, state,
	// the Supervisor's identity provider.
	if len(b.idp.seen) == 0 {
		t.Fatal("no authorize request")
	}
	q := b.idp.seen[len(b.idp.seen)-1]
	for _, s := range []string{"client_id=pinniped-cli", "redirect_uri=http%3A%2F%2F127.0.0.1%3A", "%2Fcallback", "code_challenge_method=S256", "state=", "pinniped_idp_name=dex", "pinniped_idp_type=oidc", "response_mode=form_post", "nonce=", "access_type=offline", "response_type=code"} {
		if !strings.Contains(q, s) {
			t.Errorf("authorize query %s lacks %s", q, s)
		}
	}
	if strings.Contains(q, "client_secret") {
		t.Errorf("the client secret was sent to the authorize endpoint: %s", q)
	}
	// Text: one line a check, the name and title on it.
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != len(checks)+1 || !strings.HasPrefix(lines[1], "OK    kubeconfig.context") {
		t.Errorf("text:\n%s", out)
	}
}

func resultsFor(cs []named) []Result {
	var out []Result
	for _, c := range cs {
		out = append(out, Result{Name: c.name})
	}
	return out
}

// TestNeverLogsIn: without a cached credential, nothing is asked of the
// provider but its public documents and one authorize request, nothing
// authenticated is sent to the cluster, and the you.* checks say how to
// log in.
func TestNeverLogsIn(t *testing.T) {
	b := newBed(t)
	b.cached = nil
	r := b.report()
	want(t, r, "cache.credential", Warn, "not logged in", "kubectl get ns")
	for _, name := range []string{"you.identity", "you.permissions", "agent.apiservice", "agent.credentialissuer", "agent.authenticator"} {
		want(t, r, name, Skip, "not logged in: run `kubectl get ns`")
	}
	want(t, r, "agent.proxy", Skip, "agent.credentialissuer")
	for _, req := range b.api.requests {
		if req != "GET /version" && !strings.HasSuffix(req, "/tokencredentialrequests") {
			t.Errorf("the cluster was asked %s", req)
		}
	}
	if r.Failed() != 0 {
		t.Errorf("%d failed", r.Failed())
	}
}

// TestSecretsNeverPrinted: a kubeconfig full of secrets (a client secret
// and a static token in exec arguments, a token and a key in other user
// entries), a cached credential and a password in the environment: none
// of them appears in either form of the report.
func TestSecretsNeverPrinted(t *testing.T) {
	const (
		staticToken = "static-token-do-not-print-77c1"
		userToken   = "kubeconfig-token-do-not-print-a9"
		password    = "password-do-not-print-31"
		certKey     = "cached-key-do-not-print-5e"
		envSecret   = "exec-env-secret-do-not-print-08"
	)
	staticArgs := func(b *bed) []string {
		return []string{"login", "static", "--token=" + staticToken, "--enable-concierge", "--concierge-endpoint=" + b.api.srv.URL,
			"--concierge-ca-bundle-data=" + base64.StdEncoding.EncodeToString(b.api.ca), "--concierge-authenticator-type=jwt",
			"--concierge-authenticator-name=dex"}
	}
	const (
		positional = "positional-secret-value-123"
		// Quoted by %q, it is spelt differently in the message.
		oddSecret = `ab"cd\efgh-do-not-print`
	)
	// forced are the cases whose setup puts a secret into a message: the
	// report must show it redacted (so a scrubber that does nothing fails).
	forced := map[string]bool{}
	for name, setup := range map[string]func(b *bed){
		"oidc with a client secret and a password": func(b *bed) { b.args = append(b.args, "--flow=password") },
		"static token in the arguments":            func(b *bed) { b.args = staticArgs(b) },
		// Arguments that do not parse are never echoed either.
		"static token and an unknown flag": func(b *bed) { b.args = append(staticArgs(b), "--client-secret="+clientSecret) },
		"a positional argument, also after --": func(b *bed) {
			b.args = append(staticArgs(b), "--token=", positional, "--", positional+"-after")
		},
		"an adapter error quoting the cached credential": func(b *bed) {
			b.tweak = func(d *Doctor) {
				d.f.DynamicFor = func(cfg *rest.Config) (dynamic.Interface, error) {
					return nil, fmt.Errorf("no client for key %q", cfg.KeyData)
				}
			}
		},
		"a server message echoing the client secret": func(b *bed) {
			// A token the bed's cluster takes, so its messages are read.
			b.cached.ClientKeyData, b.cached.ClientCertificateData = "", ""
			b.cached.Token, b.api.token = staticToken, staticToken
			b.args = replaceArg(b.args, "--client-secret=", oddSecret)
			b.api.strategies = []map[string]any{{"type": "KubeClusterSigningCertificate", "status": "Error", "reason": "X", "lastUpdateTime": "2026-11-25T00:00:00Z",
				"message": fmt.Sprintf("client_secret=%s rejected; as JSON %q; %s", oddSecret, oddSecret, mustJSON(oddSecret))}}
			b.api.authPhase, b.api.authConditions = "Error", []map[string]any{{"type": "Ready", "status": "False", "reason": "X",
				"message": "upstream said: " + oddSecret, "lastTransitionTime": "2026-11-25T00:00:00Z"}}
		},
	} {
		forced[name] = strings.Contains(name, "error") || strings.Contains(name, "message")
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			b.env["PINNIPED_PASSWORD"] = password
			b.env["PINNIPED_USERNAME"] = "alice"
			b.cached.ClientKeyData = certKey
			b.cached.ClientCertificateData = "cached-cert-do-not-print-9d"
			b.cached.Token = ""
			b.api.token = "unused"
			setup(b)
			// Another user, with secrets of its own, in the same file.
			b.others = map[string]*clientcmdapi.AuthInfo{"admin": {Token: userToken, ClientKeyData: []byte(certKey + "-admin")},
				"robot": {Exec: &clientcmdapi.ExecConfig{Command: "pinniped", Args: []string{"login", "static", "--token", staticToken + "-robot"},
					Env: []clientcmdapi.ExecEnvVar{{Name: "API_SECRET", Value: envSecret}}, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: "Never"}}}
			secrets := []string{staticToken, userToken, password, certKey, clientSecret, envSecret, "cached-cert-do-not-print-9d",
				positional, oddSecret, strconv.Quote(oddSecret)[1 : len(strconv.Quote(oddSecret))-1], mustJSON(oddSecret)[1 : len(mustJSON(oddSecret))-1]}
			for _, format := range []string{"text", "json"} {
				out, _ := b.run("-o", format)
				for _, s := range secrets {
					if strings.Contains(out, s) {
						t.Errorf("%s: the output holds the secret %q:\n%s", format, s, out)
					}
				}
				if !strings.Contains(out, "exec.args") {
					t.Fatalf("no report:\n%s", out)
				}
				if forced[name] && !strings.Contains(out, "[redacted]") {
					t.Errorf("%s: the forced secret is not shown redacted:\n%s", format, out)
				}
			}
			// The secrets were really met: the cached credential was read.
			if r := b.report(); !strings.HasSuffix(name, "unknown flag") && !strings.HasPrefix(name, "a positional") {
				want(t, r, "cache.credential", OK, "valid until")
			}
		})
	}
	// The scrubber itself: a secret an error message quotes is replaced.
	r := &Report{Checks: []Result{{Name: "x", Detail: "bad value " + staticToken, Fix: "no " + staticToken + "!"}}}
	r.redact([]string{staticToken, "", "ab"})
	if strings.Contains(r.Checks[0].Detail+r.Checks[0].Fix, staticToken) || !strings.Contains(r.Checks[0].Fix, "[redacted]") {
		t.Errorf("%+v", r.Checks[0])
	}
}

// TestEachBrokenLinkIsNamed breaks one link at a time; the check that
// names it fails (or warns) and says what to do.
func TestEachBrokenLinkIsNamed(t *testing.T) {
	for name, tc := range map[string]struct {
		breakIt func(b *bed)
		check   string
		status  Status
		subs    []string
	}{
		"issuer CA not passed": {func(b *bed) {
			b.args = slices.DeleteFunc(b.args, func(a string) bool { return strings.HasPrefix(a, "--ca-bundle-data") })
		},
			"issuer.tls", Fail, []string{"not trusted", "--oidc-ca-bundle", `JWTAuthenticator "dex"`}},
		"issuer spelled differently": {func(b *bed) { b.idp.calledItself = b.idp.srv.URL + "/" }, "issuer.discovery", Fail, []string{"calls itself"}},
		"no signing keys":            {func(b *bed) { b.idp.keys = nil }, "issuer.jwks", Fail, []string{"no signing key"}},
		"client id refused": {func(b *bed) {
			b.idp.authorize = func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "unknown client", http.StatusBadRequest) }
		}, "issuer.client", Fail, []string{`refused client id "pinniped-cli"`, "redirect URI"}},
		"client refused by a redirect": {func(b *bed) {
			b.idp.authorize = func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, r.URL.Query().Get("redirect_uri")+"?error=unauthorized_client&state=x", http.StatusFound)
			}
		}, "issuer.client", Fail, []string{"unauthorized_client", "pinniped-cli"}},
		"no such upstream": {func(b *bed) {
			b.idp.supervisor = true
			b.idp.providers = []map[string]any{{"name": "corp", "type": "oidc"}}
			b.args = append(b.args, "--upstream-identity-provider-name=dex")
		}, "issuer.upstream", Fail, []string{`no identity provider "dex"`, "corp"}},
		"upstream name without a Supervisor": {func(b *bed) { b.args = append(b.args, "--upstream-identity-provider-name=dex") },
			"issuer.upstream", Fail, []string{"not a Pinniped Supervisor"}},
		"agent not installed":     {func(b *bed) { b.api.tcr = http.StatusNotFound }, "agent.api", Fail, []string{"login.concierge.pinniped.dev", "pinniped install"}},
		"agent unavailable":       {func(b *bed) { b.api.tcr = http.StatusServiceUnavailable }, "agent.api", Fail, []string{"v1alpha1.login.concierge.pinniped.dev", "not available"}},
		"APIService down":         {func(b *bed) { b.api.unavailable = true }, "agent.apiservice", Fail, []string{"MissingEndpoints", "v1alpha1.login.concierge.pinniped.dev"}},
		"CredentialIssuer hidden": {func(b *bed) { b.api.ciForbidden = true }, "agent.credentialissuer", Skip, []string{"may not read CredentialIssuers", "--admin-kubeconfig"}},
		"no working strategy": {func(b *bed) {
			b.api.strategies = []map[string]any{{"type": "KubeClusterSigningCertificate", "status": "Error", "reason": "CouldNotFetchKey", "message": "no kube-controller-manager pod", "lastUpdateTime": "2026-11-25T00:00:00Z"}}
		}, "agent.credentialissuer", Fail, []string{"no working strategy", "no kube-controller-manager pod"}},
		"authenticator in error": {func(b *bed) {
			b.api.authPhase = "Error"
			b.api.authConditions = []map[string]any{{"type": "DiscoveryURLValid", "status": "False", "reason": "Unreachable", "message": "cannot reach the issuer", "lastTransitionTime": "2026-11-25T00:00:00Z"}}
		}, "agent.authenticator", Fail, []string{`JWTAuthenticator "dex" is Error`, "DiscoveryURLValid=False: cannot reach the issuer"}},
		"authenticator missing": {func(b *bed) { b.api.noAuthenticator = true }, "agent.authenticator", Fail, []string{`no JWTAuthenticator "dex"`, "--concierge-authenticator-name"}},
		"authenticator trusts another issuer": {func(b *bed) { b.api.authIssuer = "https://elsewhere.example.com" }, "agent.authenticator", Fail,
			[]string{"trusts the issuer https://elsewhere.example.com", "--issuer"}},
		"authenticator wants another audience": {func(b *bed) { b.api.authAudience = "cluster-a" }, "agent.authenticator", Fail, []string{`"cluster-a"`, "--request-audience"}},
		"cached credential refused":            {func(b *bed) { b.api.unauthenticated = true }, "you.identity", Fail, []string{"refused the cached credential", "pinniped logout"}},
		"cluster clock far ahead":              {func(b *bed) { b.api.skew = 5 * time.Minute }, "clock.cluster", Fail, []string{"5m0s ahead", "NTP"}},
		"cluster clock a bit ahead":            {func(b *bed) { b.api.skew = time.Minute }, "clock.cluster", Warn, []string{"1m0s ahead"}},
		"issuer clock behind the cluster's": {func(b *bed) { b.idp.skew = -4 * time.Minute }, "clock.issuer", Fail,
			[]string{"4m0s behind the cluster's", "no spec.allowedClockSkew allows more than 3m0s", "NTP"}},
		// The agent takes no token past its exp and none issued more than a
		// minute ahead unless its JWTAuthenticator allows the skew: the
		// fix names the field and the value.
		"issuer clock 2m ahead of the cluster's": {func(b *bed) { b.idp.skew = 2 * time.Minute }, "clock.issuer", Warn,
			[]string{"2m0s ahead of the cluster's", `the JWTAuthenticator "dex" has spec.allowedClockSkew of at least 1m0s`}},
		"issuer clock 90s behind the cluster's": {func(b *bed) { b.idp.skew = -90 * time.Second }, "clock.issuer", Warn,
			[]string{"1m30s behind the cluster's", "refuses those that live less than about 1m30s", `the JWTAuthenticator "dex" has spec.allowedClockSkew of at least 1m30s`}},
		"kubectl denies every plugin": {func(b *bed) { writeKuberc(b, "credentialPluginPolicy: DenyAll") }, "exec.policy", Fail,
			[]string{"refuses every credential plugin", "credentialPluginPolicy: Allowlist", "credentialPluginAllowlist:\n  - name: /"}},
		"pinniped not on kubectl's allowlist": {func(b *bed) {
			writeKuberc(b, "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: /usr/local/bin/kubelogin")
		}, "exec.policy", Fail, []string{"kubectl refuses pinniped", "add this entry to credentialPluginAllowlist", "\n  - name: /"}},
		"engine missing": {func(b *bed) { _ = removeEngine(b) }, "exec.engine", Fail, []string{"pinniped-engine is missing", "same release archive"}},
		"builds differ": {func(b *bed) { b.builds["pinniped-engine"] = Build{Version: "v0.8.0", Revision: "fedcba9876543210"} },
			"exec.versions", Fail, []string{"v0.8.0", "different builds"}},
		"dev builds": {func(b *bed) { b.builds["pinniped"], b.builds["pinniped-engine"] = Build{}, Build{} }, "exec.versions", Skip, []string{"could not tell"}},
		"toolchains differ": {func(b *bed) {
			b.builds["pinniped"], b.builds["pinniped-engine"] = Build{GoVersion: "go1.25.0"}, Build{GoVersion: "go1.24.2"}
		}, "exec.versions", Fail, []string{"go1.24.2", "different builds"}},
		"doctor from another install": {func(b *bed) { b.self = Build{Version: "v1.0.0", Revision: "aaaaaaaaaaaa"} }, "exec.versions", Warn, []string{"another build than this doctor"}},
		"keyring falls back": {func(b *bed) {
			b.backend = credstore.Backend{Keyring: true, Store: "/home/a/.config/pinniped/credentials", Fallback: errors.New("no D-Bus session")}
		}, "cache.backend", Warn, []string{"no D-Bus session", "/home/a/.config/pinniped/credentials", "--credential-cache=file"}},
		"a flag the model refuses":   {func(b *bed) { b.args = append(b.args, "--flow=carrier-pigeon") }, "exec.args", Fail, []string{"--flow", "carrier-pigeon"}},
		"a flag that does not parse": {func(b *bed) { b.args = append(b.args, "--listen-port=many") }, "exec.args", Fail, []string{"do not parse", "listen-port"}},
		"agent's CA not passed": {func(b *bed) {
			b.args = replaceArg(b.args, "--concierge-ca-bundle-data=", base64.StdEncoding.EncodeToString(otherCA(t)))
		},
			"agent.api", Fail, []string{"--concierge-ca-bundle-data does not trust"}},
		"cluster's CA wrong": {func(b *bed) { b.clusterCA = otherCA(t) }, "cluster.api", Fail, []string{"does not trust", "certificate-authority-data"}},
		"APIServices hidden": {func(b *bed) { b.api.apiServicesForbidden = true }, "agent.apiservice", Skip, []string{"may not read the APIService v1alpha1.login.concierge.pinniped.dev", "--admin-kubeconfig"}},
		"proxy's CA wrong": {func(b *bed) {
			b.api.strategies = append(b.api.strategies, map[string]any{"type": "ImpersonationProxy", "status": "Success", "reason": "Listening",
				"message": "listening", "lastUpdateTime": "2026-11-25T00:00:00Z", "frontend": map[string]any{"type": "ImpersonationProxy",
					"impersonationProxyInfo": map[string]any{"endpoint": b.api.srv.URL, "certificateAuthorityData": base64.StdEncoding.EncodeToString(otherCA(t))}}})
		}, "agent.proxy", Fail, []string{"its advertised CA does not sign", "spec.impersonationProxy.tls"}},
		"device flow without a device endpoint": {func(b *bed) { b.args = append(b.args, "--flow=device") }, "issuer.client", Fail, []string{"no device flow", "--flow=device"}},
		"several providers, none named": {func(b *bed) {
			b.idp.supervisor = true
			b.idp.providers = []map[string]any{{"name": "a", "type": "oidc"}, {"name": "b", "type": "ldap"}}
		}, "issuer.upstream", Warn, []string{"--upstream-identity-provider-name"}},
		"proxy certificate ending": {func(b *bed) {
			proxy, ca := shortLived(t, http.NotFoundHandler(), 48*time.Hour)
			b.api.strategies = append(b.api.strategies, map[string]any{"type": "ImpersonationProxy", "status": "Success", "reason": "Listening",
				"message": "listening", "lastUpdateTime": "2026-11-25T00:00:00Z", "frontend": map[string]any{"type": "ImpersonationProxy",
					"impersonationProxyInfo": map[string]any{"endpoint": proxy.URL, "certificateAuthorityData": base64.StdEncoding.EncodeToString(ca)}}})
		}, "agent.proxy", Warn, []string{"expires in 4", "renew"}},
		"issuer certificate ending": {func(b *bed) { b.moveIDP(shortLived(t, b.idp, 24*time.Hour)) }, "issuer.tls", Warn, []string{"expires in 2", "renew"}},
		"front not on PATH":         {func(b *bed) { b.front = b.dir + "/nowhere/pinniped" }, "exec.front", Fail, []string{"cannot find pinniped"}},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			tc.breakIt(b)
			r := b.report()
			want(t, r, tc.check, tc.status, tc.subs...)
			if tc.status == Fail {
				if _, err := b.run(); err == nil || !errors.Is(err, ErrFailed) {
					t.Errorf("a failed check, and doctor returned %v", err)
				}
			}
		})
	}
}

// TestAdminKubeconfigReadsTheAgent: what a user may not read, an
// administrator reads on that user's kubeconfig with --admin-kubeconfig;
// who you are stays the login's.
func TestAdminKubeconfigReadsTheAgent(t *testing.T) {
	b := newBed(t)
	b.api.ciForbidden, b.api.apiServicesForbidden = true, true
	out, err := b.run("-o", "json", "--admin-kubeconfig="+b.adminKubeconfig())
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"agent.apiservice", "agent.credentialissuer", "agent.authenticator"} {
		want(t, &r, name, OK)
	}
	want(t, &r, "you.identity", OK, "alice@example.com")
	if strings.Contains(out, adminToken) {
		t.Error("the admin's token is in the report")
	}

	// Without the login's credential, the admin's still reads the agent.
	b = newBed(t)
	b.cached = nil
	r2 := b.report("--admin-kubeconfig=" + b.adminKubeconfig())
	want(t, r2, "agent.credentialissuer", OK)
	want(t, r2, "you.identity", Skip)

	if _, err := b.run("--admin-kubeconfig=" + filepath.Join(b.dir, "missing")); err == nil || !strings.Contains(err.Error(), "--admin-kubeconfig") {
		t.Errorf("a missing --admin-kubeconfig: %v", err)
	}
}

func replaceArg(args []string, prefix, value string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if strings.HasPrefix(a, prefix) {
			out[i] = prefix + value
		}
	}
	return out
}

func removeEngine(b *bed) error {
	return osRemove(b.front + "-engine")
}

// TestDependentChecksSkip: a failed link skips what needs it, with why.
func TestDependentChecksSkip(t *testing.T) {
	b := newBed(t)
	b.args = slices.DeleteFunc(b.args, func(a string) bool { return strings.HasPrefix(a, "--ca-bundle-data") })
	r := b.report()
	want(t, r, "issuer.tls", Fail)
	want(t, r, "issuer.discovery", Skip, "issuer.tls")
	want(t, r, "issuer.jwks", Skip, "issuer.discovery")
	want(t, r, "issuer.client", Skip, "issuer.discovery")
	want(t, r, "clock.issuer", Skip, "issuer.tls")
	// The rest of the chain still ran.
	want(t, r, "agent.api", OK)
	want(t, r, "you.identity", OK)
}

// TestOddKubeconfigs: each gives a clear FAIL line, never a panic, and
// the list is always complete.
func TestOddKubeconfigs(t *testing.T) {
	for name, tc := range map[string]struct {
		user   *clientcmdapi.AuthInfo
		args   []string
		check  string
		status Status
		sub    string
	}{
		"no exec":           {&clientcmdapi.AuthInfo{}, nil, "exec.front", Fail, "no exec entry"},
		"a token":           {&clientcmdapi.AuthInfo{Token: "kubeconfig-token-0000"}, nil, "exec.front", Fail, "not with pinniped"},
		"another plugin":    {&clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/usr/bin/kubelogin", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: "Never"}}, nil, "exec.front", Fail, `runs "kubelogin", not pinniped`},
		"no args":           {nil, []string{}, "exec.args", Fail, "do not start with `login oidc`"},
		"login without how": {nil, []string{"login"}, "exec.args", Fail, "do not start with `login oidc`"},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			b.user = tc.user
			if tc.args != nil {
				b.args = tc.args
			}
			r := b.report()
			if len(r.Checks) != len(checks) {
				t.Fatalf("%d checks", len(r.Checks))
			}
			want(t, r, tc.check, tc.status, tc.sub)
		})
	}
	// A user whose token is in the kubeconfig is asked who it is with that.
	b := newBed(t)
	b.user = &clientcmdapi.AuthInfo{Token: b.api.token}
	r := b.report()
	want(t, r, "you.identity", OK, "alice@example.com")

	// No context at all, a context that is not there, a kubeconfig that is not.
	b = newBed(t)
	r = b.reportWith("--kubeconfig-context=prod")
	want(t, r, "kubeconfig.context", Fail, `no context "prod"`, "dev")
	r = b.reportWith("--kubeconfig=" + b.dir + "/missing")
	want(t, r, "kubeconfig.context", Fail, "cannot be read")
}

func (b *bed) reportWith(args ...string) *Report {
	b.t.Helper()
	out, _ := b.run(append([]string{"-o", "json"}, args...)...)
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		b.t.Fatalf("%v\n%s", err, out)
	}
	return &r
}

// TestStaticLogins: a static login has no issuer; without the agent the
// token is the credential.
func TestStaticLogins(t *testing.T) {
	b := newBed(t)
	b.env["TEAM_TOKEN"] = b.api.token
	b.args = []string{"login", "static", "--token-env=TEAM_TOKEN"}
	r := b.report()
	for _, name := range []string{"issuer.tls", "issuer.discovery", "clock.issuer"} {
		want(t, r, name, Skip, "static-token logins have no OIDC issuer")
	}
	want(t, r, "exec.args", OK, "from $TEAM_TOKEN")
	want(t, r, "agent.api", Skip, "does not use the agent")
	want(t, r, "you.identity", OK, "alice@example.com")

	b = newBed(t)
	b.args = []string{"login", "static", "--token-env=UNSET"}
	want(t, b.report(), "exec.args", Fail, "--token-env UNSET")
}

// TestCacheModes: what each --credential-cache says, and a front named
// relative to the kubeconfig.
func TestCacheModes(t *testing.T) {
	b := newBed(t)
	b.args = replaceArg(b.args, "--credential-cache=", "none")
	r := b.report()
	want(t, r, "cache.backend", OK, "nothing is cached")
	want(t, r, "cache.credential", Skip, "caches no cluster credential")
	want(t, r, "you.identity", Skip, "not logged in")

	b = newBed(t)
	b.args = replaceArg(b.args, "--credential-cache=", "file")
	b.backend = credstore.Backend{Store: "/x/credentials"}
	b.command = "bin/pinniped" // beside the kubeconfig, as client-go resolves it
	r = b.report()
	want(t, r, "cache.backend", OK, "/x/credentials")
	want(t, r, "cache.credential", OK, "a token")
	want(t, r, "exec.front", OK, b.front)

	b = newBed(t)
	b.args = append(b.args, "--flow=password")
	want(t, b.report(), "issuer.client", Skip, "password logins")
}

// TestNeverRunsThePlugin: whatever the checks do, the kubeconfig's exec
// plugin (which would log in) never runs; here it would leave a file.
func TestNeverRunsThePlugin(t *testing.T) {
	for _, cached := range []bool{true, false} {
		b := newBed(t)
		marker := filepath.Join(b.dir, "plugin-ran")
		if err := os.WriteFile(b.front, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o700); err != nil { //nolint:gosec // a test plugin
			t.Fatal(err)
		}
		b.command = b.front
		if !cached {
			b.cached = nil
		}
		b.report()
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("cached %v: the exec plugin ran", cached)
		}
	}
}

// TestWebhookLogins: a static token exchanged at a WebhookAuthenticator.
func TestWebhookLogins(t *testing.T) {
	b := newBed(t)
	b.env["TEAM_TOKEN"] = "team-token-0000"
	b.args = []string{"login", "static", "--token-env=TEAM_TOKEN", "--enable-concierge", "--concierge-endpoint=" + b.api.srv.URL,
		"--concierge-ca-bundle-data=" + base64.StdEncoding.EncodeToString(b.api.ca), "--concierge-authenticator-type=webhook",
		"--concierge-authenticator-name=hook"}
	r := b.report()
	want(t, r, "agent.authenticator", OK, `WebhookAuthenticator "hook" is Ready`)
	want(t, r, "cache.credential", OK, "a token")
	b.api.authPhase = "Pending"
	want(t, b.report(), "agent.authenticator", Fail, `WebhookAuthenticator "hook" is Pending`)
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestIssuerClockByWhoChecksTokens: the advice on an issuer's clock off
// the cluster's follows what checks its tokens' times there. Only a
// JWTAuthenticator has spec.allowedClockSkew; kube-apiserver (no
// Concierge) has no such setting, and behind a WebhookAuthenticator the
// agent checks no token times.
func TestIssuerClockByWhoChecksTokens(t *testing.T) {
	withoutConcierge := func(b *bed) {
		b.args = slices.DeleteFunc(b.args, func(a string) bool {
			return strings.HasPrefix(a, "--enable-concierge") || strings.HasPrefix(a, "--concierge-")
		})
	}
	webhook := func(b *bed) {
		b.args = replaceArg(b.args, "--concierge-authenticator-type=", "webhook")
		b.args = replaceArg(b.args, "--concierge-authenticator-name=", "hook")
	}
	for name, tc := range map[string]struct {
		shape  func(*bed)
		skew   time.Duration
		status Status
		subs   []string
		not    []string
	}{
		"JWTAuthenticator, issuer behind": {func(*bed) {}, -90 * time.Second, Warn,
			[]string{"the agent refuses those that live less than about 1m30s", "Pinniped Supervisor's 2-minute ones", `the JWTAuthenticator "dex" has spec.allowedClockSkew of at least 1m30s`}, nil},
		"JWTAuthenticator, issuer ahead": {func(*bed) {}, 2 * time.Minute, Warn,
			[]string{"(iat)", `the JWTAuthenticator "dex" has spec.allowedClockSkew of at least 1m0s`}, nil},
		"no Concierge, issuer behind": {withoutConcierge, -90 * time.Second, Warn,
			[]string{"kube-apiserver, which allows no time past exp, refuses those that live less than about 1m30s", "no setting for clock skew", "NTP"},
			[]string{"allowedClockSkew", "JWTAuthenticator", "agent"}},
		"no Concierge, issuer ahead": {withoutConcierge, 2 * time.Minute, Warn,
			[]string{"nbf (not before)", "no setting for clock skew", "NTP"}, []string{"allowedClockSkew", "JWTAuthenticator", "iat"}},
		"no Concierge, issuer far behind": {withoutConcierge, -4 * time.Minute, Fail,
			[]string{"kube-apiserver, which allows no time past exp, refuses those that live less than about", "NTP"}, []string{"allowedClockSkew"}},
		// Still off this machine's clock, which the CLI's own checks mind.
		"WebhookAuthenticator, issuer behind": {webhook, -90 * time.Second, Warn,
			[]string{"1m30s behind this machine's", "fix the issuer's clock (NTP)"}, []string{"allowedClockSkew", "JWTAuthenticator", "agent"}},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			tc.shape(b)
			b.idp.skew = tc.skew
			r := b.report()
			want(t, r, "clock.issuer", tc.status, tc.subs...)
			c := r.Check("clock.issuer")
			for _, s := range tc.not {
				if strings.Contains(c.Fix, s) {
					t.Errorf("the fix names %q: %s", s, c.Fix)
				}
			}
		})
	}
}

// writeKuberc gives the bed a kuberc (kubectl's preferences) holding body.
func writeKuberc(b *bed, body string) {
	path := filepath.Join(b.dir, "kuberc")
	if err := os.WriteFile(path, []byte("apiVersion: kubectl.config.k8s.io/v1beta1\nkind: Preference\n"+body+"\n"), 0o600); err != nil {
		b.t.Fatal(err)
	}
	b.env["KUBERC"] = path
}

// TestPluginPolicy: pinniped allowed by kubectl's kuberc, by its full path
// or by a name found on $PATH, is OK; so is no kuberc at all.
func TestPluginPolicy(t *testing.T) {
	for name, body := range map[string]string{
		"no policy":  "",
		"allow all":  "credentialPluginPolicy: AllowAll",
		"full path":  "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: /usr/bin/other\n- name: FRONT",
		"on $PATH":   "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: pinniped",
		"both, same": "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: FRONT\n  command: FRONT",
	} {
		t.Run(name, func(t *testing.T) {
			b := newBed(t)
			writeKuberc(b, strings.ReplaceAll(body, "FRONT", b.front))
			want(t, b.report(), "exec.policy", OK)
		})
	}
	// client-go refuses a list beside any other policy: no plugin runs.
	for _, body := range []string{"credentialPluginAllowlist:\n- name: FRONT", "credentialPluginPolicy: AllowAll\ncredentialPluginAllowlist: []"} {
		b := newBed(t)
		writeKuberc(b, strings.ReplaceAll(body, "FRONT", b.front))
		want(t, b.report(), "exec.policy", Fail, "set credentialPluginPolicy: Allowlist")
	}
	// kubectl 1.36 refuses an entry spelled both ways with different
	// values, and client-go one that is not a clean path.
	for body, fix := range map[string]string{
		"credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: /usr/bin/other\n  command: FRONT": "keep one, such as\n  - name: ",
		"credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- command: /usr//bin/../bin/pinniped":     "write it as /usr/bin/pinniped",
	} {
		b := newBed(t)
		writeKuberc(b, strings.ReplaceAll(body, "FRONT", b.front))
		want(t, b.report(), "exec.policy", Fail, fix)
	}
	// command: alone is 1.36's spelling: kubectl 1.35 reads an empty entry.
	b := newBed(t)
	writeKuberc(b, "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- command: "+b.front)
	want(t, b.report(), "exec.policy", Warn, "for kubectl 1.35 too", "  - name: "+b.front)
	// ... and so does another entry spelled command: beside pinniped's name:.
	b = newBed(t)
	writeKuberc(b, "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: "+b.front+"\n- command: /usr/bin/kubelogin")
	want(t, b.report(), "exec.policy", Warn, "spell every entry name:")
	// An entry naming nothing: every kubectl refuses the list.
	b = newBed(t)
	writeKuberc(b, "credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n- name: "+b.front+"\n- {}")
	want(t, b.report(), "exec.policy", Fail, "empty allowlist entry")
	b = newBed(t)
	b.env["KUBERC"] = "off"
	writeKuberc(b, "credentialPluginPolicy: DenyAll")
	b.env["KUBERC"] = "off"
	want(t, b.report(), "exec.policy", OK, "reads no kuberc")
}
