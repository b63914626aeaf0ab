package logout

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/pinniped-kit/pinniped/cache"
	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/keyringstore"
	"github.com/pinniped-kit/pinniped/cache/lock"
	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/commands/status"
	"github.com/pinniped-kit/pinniped/cli/credstore"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags/flagset"
)

// memKeyring is an OS keyring that works.
type memKeyring map[string]string

func (m memKeyring) Get(service, user string) (string, error) {
	v, ok := m[service+"/"+user]
	if !ok {
		return "", keyring.ErrNotFound
	}
	return v, nil
}
func (m memKeyring) Set(service, user, value string) error { m[service+"/"+user] = value; return nil }
func (m memKeyring) Delete(service, user string) error {
	if _, ok := m[service+"/"+user]; !ok {
		return keyring.ErrNotFound
	}
	delete(m, service+"/"+user)
	return nil
}

// bothStores are the real places of a test's XDG_CONFIG_HOME (files,
// locks), with a keyring of the test's own beside the files.
type bothStores struct {
	credstore.Places
	keyring, files cache.Store
}

func (b bothStores) Everywhere(string) ([]cache.Store, error) {
	return []cache.Store{b.keyring, b.files}, nil
}

// testCaches are what runCmd's factory opens: setup's.
var testCaches cmdutil.Caches

// setup makes a keyring and its file fallback the stores logout and status
// look in, and a kubeconfig whose context logs in with args.
func setup(t *testing.T, args []string, env map[string]string) (keyringStore, files cache.Store, kubeconfig string) {
	config := t.TempDir()
	keyringStore = &keyringstore.Store{Service: "pinniped", Backend: memKeyring{}}
	files = &filestore.Store{Dir: filepath.Join(config, "pinniped", "credentials")}
	testCaches = bothStores{credstore.Places{Getenv: func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return config
		}
		return ""
	}}, keyringStore, files}
	t.Cleanup(func() { testCaches = nil })
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {server: \"https://10.0.0.1:6443\"}\n")
	b.WriteString("contexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n")
	b.WriteString("      command: C:\\\\Program Files\\\\pinniped\\\\pinniped.exe\n      provideClusterInfo: true\n      interactiveMode: IfAvailable\n      args:\n")
	for _, a := range args {
		b.WriteString("      - \"" + a + "\"\n")
	}
	b.WriteString("      env:\n")
	for k, v := range env {
		b.WriteString("      - {name: " + k + ", value: " + v + "}\n")
	}
	if len(env) == 0 {
		b.WriteString("      - {name: UNRELATED, value: x}\n")
	}
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyringStore, files, kubeconfig
}

var ldapArgs = []string{"login", "oidc", "--issuer=https://supervisor.example.com", "--client-id=pinniped-cli",
	"--upstream-identity-provider-name=LDAP", "--upstream-identity-provider-type=ldap", "--upstream-identity-provider-flow=cli_password"}

// supervisorLDAPArgs are ldapArgs for a Supervisor of the test's own: a
// logout asks the issuer of a session it removes to revoke it.
func supervisorLDAPArgs(t *testing.T) []string {
	ti := newTestIssuer(t)
	ti.Supervisor = true
	return ti.args(ldapArgs[4:]...)
}

// cacheLogin caches a credential and a session in st under the keys the
// login of args (with env) uses for the kubeconfig's cluster.
func cacheLogin(t *testing.T, st cache.Store, args []string, env map[string]string) {
	t.Helper()
	c, err := flagset.ParseOIDC(args[2:], func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cred := credcache.Credential{Token: "t", ExpirationTimestamp: time.Now().Add(time.Hour)}
	if err := (&credcache.Cache{Now: time.Now, Store: st}).Put(ctx, c.CredentialKey(config.Cluster{Server: "https://10.0.0.1:6443"}), "label", cred); err != nil {
		t.Fatal(err)
	}
	if err := (&sessions.Cache{Store: st}).Put(ctx, c.SessionKey(), &sessions.Tokens{IDToken: "id", RefreshToken: "r"}); err != nil {
		t.Fatal(err)
	}
}

func empty(t *testing.T, stores ...cache.Store) {
	t.Helper()
	for _, st := range stores {
		list, _ := (&credcache.Cache{Now: time.Now, Store: st}).List(context.Background())
		keys, _ := (&sessions.Cache{Store: st}).Keys(context.Background())
		if len(list) != 0 || len(keys) != 0 {
			t.Errorf("%s still holds %d credentials and %d sessions", st.Describe(), len(list), len(keys))
		}
	}
}

// TestLogoutReachesTheKeyringAndItsFiles: a context's credential and
// session are removed from the keyring and from the file fallback (copies
// written there while the keyring hung), with the user named in the
// kubeconfig's own environment, whatever this shell has.
func TestLogoutReachesTheKeyringAndItsFiles(t *testing.T) {
	env := map[string]string{"PINNIPED_USERNAME": "alice"}
	args := supervisorLDAPArgs(t)
	kr, files, kubeconfig := setup(t, args, env)
	cacheLogin(t, kr, args, env)
	cacheLogin(t, files, args, env)
	out, err := runCmd(t, map[string]string{"PINNIPED_USERNAME": "someone-else"}, "logout", "--kubeconfig="+kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Logged out of c") {
		t.Fatalf("said %q", out)
	}
	empty(t, kr, files)
}

// TestLogoutAllClearsEachStoreOnItsOwn: entries only the file fallback
// lists are removed even when the keyring has an index of its own.
func TestLogoutAllClearsEachStoreOnItsOwn(t *testing.T) {
	kr, files, _ := setup(t, ldapArgs, nil)
	cacheLogin(t, kr, ldapArgs, map[string]string{"PINNIPED_USERNAME": "alice"})
	cacheLogin(t, files, ldapArgs, map[string]string{"PINNIPED_USERNAME": "bob"})
	// What status lists first: both stores.
	listed, err := runCmd(t, nil, "status")
	if err != nil || strings.Count(listed, "label") != 2 || !strings.Contains(listed, "OS keyring") || !strings.Contains(listed, files.Describe()) {
		t.Fatalf("status: %v\n%s", err, listed)
	}
	out, err := runCmd(t, nil, "logout", "--all")
	if err != nil || !strings.Contains(out, "Removed 4 cached credentials and sessions") {
		t.Fatalf("%v: %s", err, out)
	}
	empty(t, kr, files)
	if listed, _ := runCmd(t, nil, "status"); !strings.Contains(listed, "No cached credentials") {
		t.Fatalf("status after logout --all: %s", listed)
	}
	if _, err := runCmd(t, nil, "logout", "--all", "--context=x"); err == nil {
		t.Fatal("--all with --context accepted")
	}
}

// TestLogoutWithoutThePasswordUser: when the keys depend on a username this
// shell does not have, logout says so instead of "you are logged out".
func TestLogoutWithoutThePasswordUser(t *testing.T) {
	kr, _, kubeconfig := setup(t, ldapArgs, nil)
	cacheLogin(t, kr, ldapArgs, map[string]string{"PINNIPED_USERNAME": "alice"})
	out, err := runCmd(t, nil, "logout", "--kubeconfig="+kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "PINNIPED_USERNAME is not set") {
		t.Fatalf("said %q", out)
	}
}

// runCmd runs `pinniped logout|status args` with env as the environment;
// it returns what the command wrote (stdout and stderr).
func runCmd(t *testing.T, env map[string]string, name string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	f := cmdutil.Test(nil, &out, &out, env)
	f.Now = time.Now
	f.Caches = testCaches
	cmd := NewCmdLogout(f, nil)
	if name == "status" {
		cmd = status.NewCmdStatus(f, nil)
	}
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestIsPinniped(t *testing.T) {
	for cmd, want := range map[string]bool{
		"pinniped": true, "/usr/local/bin/pinniped": true, `C:\Program Files\pinniped\pinniped.exe`: true, `C:\tools\PINNIPED.EXE`: true,
		"kubectl": false, "/usr/bin/pinniped-engine": false, `C:\x\pinniped-agent.exe`: false,
	} {
		if handoff.IsFront(cmd) != want {
			t.Errorf("%s: %v", cmd, !want)
		}
	}
}

// TestLogoutWaitsForALoginInProgress: a login or refresh running for the
// context holds its session's lock and would save its result after the
// delete; logout does not report success under it.
func TestLogoutWaitsForALoginInProgress(t *testing.T) {
	env := map[string]string{"PINNIPED_USERNAME": "alice"}
	args := supervisorLDAPArgs(t)
	kr, files, kubeconfig := setup(t, args, env)
	cacheLogin(t, kr, args, env)
	c, err := flagset.ParseOIDC(args[2:], func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	dir, err := testCaches.LockDir("keyring")
	if err != nil {
		t.Fatal(err)
	}
	held, err := lock.Acquire(context.Background(), dir, c.SessionKey())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Unlock() }()
	var out bytes.Buffer
	f := cmdutil.Test(nil, &out, &out, env)
	f.Now = time.Now
	f.Caches = testCaches
	cmd := NewCmdLogout(f, func(ctx context.Context, o *Options) error {
		if o.LoginWait != 10*time.Second {
			t.Errorf("logout waits %s for a login, want 10s", o.LoginWait)
		}
		o.LoginWait = 100 * time.Millisecond
		return o.Run(ctx)
	})
	cmd.SetArgs([]string{"--kubeconfig=" + kubeconfig})
	if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("logout under a running login: %v\n%s", err, out.String())
	}
	_ = held.Unlock()
	if _, err := runCmd(t, env, "logout", "--kubeconfig="+kubeconfig); err != nil {
		t.Fatal(err)
	}
	empty(t, kr, files)
}
