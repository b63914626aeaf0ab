//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// stopDaemon stops one of the bed's daemons for the rest of the test (a
// grace of 0 kills it outright) and starts it again when the test ends,
// waiting until ready says it serves, so a failing test never leaves the
// bed without it.
func stopDaemon(t *testing.T, name string, grace time.Duration, ready func(context.Context) error) (start func()) {
	t.Helper()
	if err := Bed.Stop(name, grace); err != nil {
		t.Fatal(err)
	}
	started := false
	start = func() {
		t.Helper()
		if started {
			return
		}
		started = true
		if err := Bed.Start(name); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 60*time.Second, name+" serves again", ready)
	}
	t.Cleanup(start)
	return start
}

// dexServes: Dex answers its discovery document.
func dexServes(ctx context.Context) error {
	client, err := Bed.DexHTTPClient()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, Bed.Config().DexIssuer()+"/.well-known/openid-configuration", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &httpStatusError{resp.StatusCode}
	}
	return nil
}

type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return http.StatusText(e.code) }

// cacheFiles are the files a login keeps under a configuration directory
// (lock files aside), each with a digest of its content.
func cacheFiles(t *testing.T, config string) map[string]string {
	t.Helper()
	return cacheTree(t, filepath.Join(config, "pinniped"))
}

// cacheTree is cacheFiles of a copy of a configuration directory's pinniped
// folder.
func cacheTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+"locks"+string(filepath.Separator)) {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		out[strings.TrimPrefix(p, root)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// TestIdentityProviderDown: with Dex stopped, the credentials kubectl
// already has cached keep working; a login that needs Dex fails with a
// message naming Dex's issuer and the cause, and caches nothing; what was
// cached stays byte for byte as it was; once Dex is back, the next call
// logs in.
func TestIdentityProviderDown(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password")
	env := func(config string) []string {
		// No session bus: the caches are files, which the test can read.
		return []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + config, "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=",
			"PINNIPED_USERNAME=" + alice.Email, "PINNIPED_PASSWORD=" + alice.Password}
	}
	loggedIn, fresh := t.TempDir(), t.TempDir()
	if got, stderr, err := whoami(t, env(loggedIn)); err != nil || got != alice.Email {
		t.Fatalf("whoami: %q (%v)\n%s", got, err, stderr)
	}
	before := cacheFiles(t, loggedIn)
	if len(before) == 0 {
		t.Fatal("the login cached nothing")
	}

	startDex := stopDaemon(t, "dex", 5*time.Second, dexServes)
	for i := range 3 {
		if got, stderr, err := whoami(t, env(loggedIn)); err != nil || got != alice.Email {
			t.Fatalf("call %d with Dex down and a cached credential: %q (%v)\n%s", i+1, got, err, stderr)
		}
	}
	_, stderr, err := whoami(t, env(fresh))
	if err == nil {
		t.Fatal("a login succeeded with Dex down")
	}
	if !strings.Contains(stderr, Bed.Config().DexIssuer()) || !strings.Contains(stderr, "connection refused") {
		t.Fatalf("the failed login should name the issuer and the cause:\n%s", stderr)
	}
	if strings.Contains(stderr, alice.Password) {
		t.Fatalf("the password was shown:\n%s", stderr)
	}
	if left := cacheFiles(t, fresh); len(left) != 0 {
		t.Fatalf("a failed login cached %v", slices.Collect(maps.Keys(left)))
	}
	if after := cacheFiles(t, loggedIn); !maps.Equal(before, after) {
		t.Fatalf("the cache changed while Dex was down:\nbefore %v\nafter  %v", before, after)
	}

	startDex()
	if got, stderr, err := whoami(t, env(fresh)); err != nil || got != alice.Email {
		t.Fatalf("whoami once Dex is back: %q (%v)\n%s", got, err, stderr)
	}
}

// TestUnwritableCache: when the cache's disk is full, or read-only, at the
// moment a login would write a credential, kubectl still gets its
// credential, stderr says the cache could not be written, and what was
// cached before is left whole (no file changed, none half-written). The
// cache lives on a small tmpfs in a mount namespace of the test's own.
func TestUnwritableCache(t *testing.T) {
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	kc := userKubeconfig(t, pinniped, "--oidc-flow=password")
	raw, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	// The same login for a cluster credential of another key: the session
	// is found, the exchange runs, and its credential must be written.
	other := filepath.Join(t.TempDir(), "other.kubeconfig")
	if err := os.WriteFile(other, []byte(reencodeCABundle(t, string(raw))), 0o600); err != nil {
		t.Fatal(err)
	}
	const script = `set -e
mount -t tmpfs -o size=1m,mode=0700 tmpfs "$CFG"
KUBECONFIG="$KC1" kubectl auth whoami -o jsonpath='{.status.userInfo.username}' > "$OUT/first" 2> "$OUT/first.err"
cp -a "$CFG/pinniped" "$OUT/before"
case "$MODE" in
full) dd if=/dev/zero of="$CFG/fill" bs=4096 2>/dev/null || true ;;
read-only) mount -o remount,ro "$CFG" ;;
esac
rc=0
KUBECONFIG="$KC2" kubectl auth whoami -o jsonpath='{.status.userInfo.username}' > "$OUT/second" 2> "$OUT/second.err" || rc=$?
echo $rc > "$OUT/second.rc"
cp -a "$CFG/pinniped" "$OUT/after"
`
	for _, mode := range []string{"full", "read-only"} {
		t.Run(mode, func(t *testing.T) {
			cfg, out := t.TempDir(), t.TempDir()
			cmd := exec.CommandContext(context.Background(), "unshare", "--mount", "sh", "-c", script)
			cmd.Env = append(BedEnv(), "CFG="+cfg, "OUT="+out, "MODE="+mode, "KC1="+kc, "KC2="+other,
				"XDG_CONFIG_HOME="+cfg, "DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR=",
				"PINNIPED_USERNAME="+alice.Email, "PINNIPED_PASSWORD="+alice.Password)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			read := func(name string) string {
				b, _ := os.ReadFile(filepath.Join(out, name))
				return strings.TrimSpace(string(b))
			}
			if read("first") != alice.Email {
				t.Fatalf("the first login: %q\n%s", read("first"), read("first.err"))
			}
			if read("second.rc") != "0" || read("second") != alice.Email {
				t.Fatalf("with the cache %s, kubectl got %q (exit %s)\n%s", mode, read("second"), read("second.rc"), read("second.err"))
			}
			if !strings.Contains(read("second.err"), "could not cache the credential") {
				t.Errorf("no warning that the cache could not be written:\n%s", read("second.err"))
			}
			before, after := cacheTree(t, filepath.Join(out, "before")), cacheTree(t, filepath.Join(out, "after"))
			if len(before) == 0 || !maps.Equal(before, after) {
				t.Fatalf("the cache changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
