//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// nobody is the uid and gid another local user's requests are sent as.
const nobody = 65534

// TestLocalProxyRefusesOthers: pinniped proxy, started by this user for
// alice's kubeconfig, serves only requests that carry its local secret and
// come from this user's own processes; it strips the identity headers a
// client sends, refuses impersonation, and kubectl through its kubeconfig
// is alice.
func TestLocalProxyRefusesOthers(t *testing.T) {
	if Bed.Config().Profile != testbed.ProfileKubeadm {
		t.Skip("pinniped proxy checks its callers the same way whatever it forwards to")
	}
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password", "--credential-cache=file")
	proxied, stateDir := startLocalProxy(t, pinniped, kc)
	raw, err := clientcmd.LoadFromFile(proxied)
	if err != nil {
		t.Fatal(err)
	}
	base, ca, secret := localProxyTarget(t, proxied, stateDir, raw.CurrentContext)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	// HTTP/1.1: Go's HTTP/2 client refuses to send a Connection header at
	// all (the proxy's own tests send raw HTTP/2 frames for that).
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{},
	}}
	// whoami asks the API server who the request is, through the proxy.
	whoami := func(headers http.Header) review {
		t.Helper()
		return askWhoAmI(t, context.Background(), c, base, headers)
	}
	auth := http.Header{"Authorization": {"Bearer " + secret}}
	with := func(h http.Header, more map[string][]string) http.Header {
		out := h.Clone()
		for k, v := range more {
			out[k] = v
		}
		return out
	}

	t.Run("kubectl through its kubeconfig is alice", func(t *testing.T) {
		out := Run(t, nil, "kubectl", "--kubeconfig", proxied, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if out != alice.Email {
			t.Fatalf("kubectl through pinniped proxy is %q, want %q", out, alice.Email)
		}
	})

	t.Run("a request without the secret is refused", func(t *testing.T) {
		for name, h := range map[string]http.Header{
			"no Authorization":      {},
			"another secret":        {"Authorization": {"Bearer " + strings.Repeat("x", len(secret))}},
			"the secret twice":      {"Authorization": {"Bearer " + secret, "Bearer " + secret}},
			"a Basic Authorization": {"Authorization": {"Basic " + secret}},
		} {
			if a := whoami(h); a.code != http.StatusUnauthorized || a.username != "" {
				t.Errorf("%s: HTTP %d %s, want 401", name, a.code, a.body)
			}
		}
	})

	t.Run("identity headers a client sends never reach the API server", func(t *testing.T) {
		for name, h := range map[string]http.Header{
			"plain": auth,
			"X-Remote-*": with(auth, map[string][]string{"X-Remote-User": {"admin"}, "X-Remote-Group": {"system:masters"},
				"x_remote_extra_scopes": {"all"}}),
			"Forwarded and X-Forwarded-*": with(auth, map[string][]string{"Forwarded": {"for=10.0.0.1"}, "X-Forwarded-For": {"10.0.0.1"},
				"X-Real-Ip": {"10.0.0.1"}}),
			"Proxy-Authorization": with(auth, map[string][]string{"Proxy-Authorization": {"Bearer " + secret}}),
		} {
			a := whoami(h)
			if a.code != http.StatusCreated || a.username != alice.Email || slices.Contains(a.groups, "system:masters") {
				t.Errorf("%s: the API server saw %q %v (HTTP %d %s), want only %s", name, a.username, a.groups, a.code, a.body, alice.Email)
			}
		}
		for name, h := range map[string]http.Header{
			"Impersonate-User (kubectl --as)":                  with(auth, map[string][]string{"Impersonate-User": {"admin"}}),
			"impersonate_group":                                with(auth, map[string][]string{"impersonate_group": {"system:masters"}}),
			"Connection naming Authorization":                  with(auth, map[string][]string{"Connection": {"Authorization"}}),
			"a bearer token in a WebSocket subprotocol header": with(auth, map[string][]string{"Sec-Websocket-Protocol": {"base64url.bearer.authorization.k8s.io.eA"}}),
		} {
			if a := whoami(h); a.code != http.StatusBadRequest {
				t.Errorf("%s: HTTP %d %s, want 400", name, a.code, a.body)
			}
		}
	})

	t.Run("another local user is refused even with the secret", func(t *testing.T) {
		// A directory and files nobody can read: the proxy's CA and a curl
		// header file holding the secret, as if it had been copied.
		dir, err := os.MkdirTemp("", "pinniped-e2e-nobody-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // G302: the other user must read it
			t.Fatal(err)
		}
		caFile, headerFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "headers")
		for f, data := range map[string]string{caFile: string(ca), headerFile: "Authorization: Bearer " + secret + "\n"} {
			if err := os.WriteFile(f, []byte(data), 0o644); err != nil { //nolint:gosec // G306: the other user must read it
				t.Fatal(err)
			}
		}
		code := func(uid uint32) int {
			t.Helper()
			cmd := exec.CommandContext(context.Background(), "curl", "--silent", "--noproxy", "*", "--max-time", "20",
				"--cacert", caFile, "--header", "@"+headerFile, "--output", "/dev/null", "--write-out", "%{http_code}", base+"/api")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("curl as uid %d: %v", uid, err)
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(out)))
			if err != nil {
				t.Fatalf("curl as uid %d wrote %q", uid, out)
			}
			return n
		}
		self := uint32(os.Getuid()) //nolint:gosec // a uid fits
		if got := code(self); got != http.StatusOK {
			t.Fatalf("the same request as this user (uid %d): HTTP %d, want 200: the control must pass", self, got)
		}
		if got := code(nobody); got != http.StatusForbidden {
			t.Errorf("as another local user (uid %d) with the secret: HTTP %d, want 403", nobody, got)
		}
	})
}
