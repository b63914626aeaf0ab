package login

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin/oidctest"
)

// execCredential is what a login prints on stdout.
type execCredential struct {
	APIVersion, Kind string
	Status           struct {
		Token               string
		ExpirationTimestamp *time.Time
	}
}

// execute runs a login command built on a test factory with env, through
// its real Run; stdout must hold nothing but the ExecCredential.
func execute(t *testing.T, env map[string]string, newCmd func(*cmdutil.Factory) *cobra.Command, args ...string) (execCredential, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	f := cmdutil.Test(strings.NewReader(""), &stdout, &stderr, env)
	f.Now = time.Now
	cmd := newCmd(f)
	cmd.SetArgs(args)
	cmd.SetOut(&stderr)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(context.Background())
	var cred execCredential
	if err == nil {
		if derr := json.Unmarshal(stdout.Bytes(), &cred); derr != nil {
			t.Fatalf("stdout is not an ExecCredential: %v\n%s", derr, stdout.String())
		}
	} else if stdout.Len() > 0 {
		t.Fatalf("a failed login wrote to stdout: %s", stdout.String())
	}
	return cred, stderr.String(), err
}

// TestLoginStaticRun: a static token without the agent is the credential
// itself; it goes to stdout as an ExecCredential of the version kubectl
// asked for, and never to stderr.
func TestLoginStaticRun(t *testing.T) {
	env := map[string]string{"KUBERNETES_EXEC_INFO": execInfo, "XDG_CONFIG_HOME": t.TempDir(), "MY_TOKEN": "static-s3cret"}
	newCmd := func(f *cmdutil.Factory) *cobra.Command { return NewCmdStatic(f, nil) }
	cred, stderr, err := execute(t, env, newCmd, "--token-env=MY_TOKEN", "--credential-cache=file")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if cred.Kind != "ExecCredential" || cred.APIVersion != "client.authentication.k8s.io/v1" || cred.Status.Token != "static-s3cret" {
		t.Fatalf("%+v", cred)
	}
	if strings.Contains(stderr, "static-s3cret") {
		t.Fatalf("the token reached stderr: %s", stderr)
	}
}

// TestLoginOIDCRun: a password login against an issuer, then the same
// command again answers from what the first one cached (no second password
// grant), all through the command's real Run and the factory's caches
// under the test's own XDG_CONFIG_HOME; a wrong password is refused.
func TestLoginOIDCRun(t *testing.T) {
	idp := oidctest.New(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, idp.CABundle, 0o600); err != nil {
		t.Fatal(err)
	}
	newCmd := func(f *cmdutil.Factory) *cobra.Command { return NewCmdOIDC(f, nil) }
	login := func(config, password string) (execCredential, string, error) {
		env := map[string]string{"KUBERNETES_EXEC_INFO": execInfo, "XDG_CONFIG_HOME": config,
			"PINNIPED_USERNAME": "alice", "PINNIPED_PASSWORD": password}
		return execute(t, env, newCmd, "--issuer="+idp.URL, "--ca-bundle="+ca, "--flow=password", "--credential-cache=file", "--scopes=openid,offline_access")
	}
	config := t.TempDir()
	cred, stderr, err := login(config, "password")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if cred.Status.Token == "" || cred.Status.ExpirationTimestamp == nil || idp.PasswordGrants.Load() != 1 {
		t.Fatalf("%+v, %d password grants\n%s", cred, idp.PasswordGrants.Load(), stderr)
	}
	if strings.Contains(stderr, cred.Status.Token) {
		t.Fatalf("the token reached stderr: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(config, "pinniped", "credentials")); err != nil {
		t.Fatalf("nothing cached under the test's XDG_CONFIG_HOME: %v", err)
	}
	again, stderr, err := login(config, "")
	if err != nil || again.Status.Token != cred.Status.Token || idp.PasswordGrants.Load() != 1 {
		t.Fatalf("second login: %v, same token %v, %d password grants\n%s", err, again.Status.Token == cred.Status.Token, idp.PasswordGrants.Load(), stderr)
	}
	const wrong = "Wrong-Horse-Battery-7"
	if _, stderr, err := login(t.TempDir(), wrong); err == nil || strings.Contains(err.Error()+stderr, wrong) {
		t.Fatalf("a wrong password: %v\n%s", err, stderr)
	}
}

// TestLoginAhead: `pinniped login --context` runs the login of the
// context's exec entry (its arguments and its environment) and caches the
// credential under the key kubectl's own call of the plugin uses, which
// then answers from the cache; stdout stays empty. A context that does not
// log in with pinniped is refused, saying why.
func TestLoginAhead(t *testing.T) {
	idp := oidctest.New(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, idp.CABundle, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"login", "oidc", "--issuer=" + idp.URL, "--ca-bundle=" + ca, "--flow=password", "--credential-cache=file", "--scopes=openid,offline_access"}
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\ncurrent-context: other\nclusters:\n- name: c\n  cluster: {server: \"https://10.0.0.1:6443\"}\n")
	b.WriteString("contexts:\n- name: dev\n  context: {cluster: c, user: p}\n- name: other\n  context: {cluster: c, user: t}\n")
	b.WriteString("users:\n- name: t\n  user: {token: not-pinniped}\n- name: p\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: pinniped\n      provideClusterInfo: true\n      args:\n")
	for _, a := range args {
		b.WriteString("      - \"" + a + "\"\n")
	}
	b.WriteString("      env:\n      - {name: PINNIPED_USERNAME, value: alice}\n")
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	config := t.TempDir()
	env := map[string]string{"KUBECONFIG": kc, "XDG_CONFIG_HOME": config, "PINNIPED_PASSWORD": "password"}
	run := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		f := cmdutil.Test(strings.NewReader(""), &stdout, &stderr, env)
		f.Now = time.Now
		cmd := NewCmdLogin(f)
		cmd.SetArgs(args)
		cmd.SetOut(&stderr)
		cmd.SetErr(&stderr)
		err := cmd.ExecuteContext(context.Background())
		return stdout.String(), stderr.String(), err
	}
	stdout, stderr, err := run("--context", "dev")
	if err != nil || stdout != "" || !strings.Contains(stderr, "Context dev is logged in") || idp.PasswordGrants.Load() != 1 {
		t.Fatalf("login ahead: %v, stdout %q, %d password grants\n%s", err, stdout, idp.PasswordGrants.Load(), stderr)
	}
	if _, stderr, err := run(); err == nil || !strings.Contains(err.Error(), `context "other"`) || !strings.Contains(err.Error(), "get kubeconfig") {
		t.Fatalf("the current context, which does not log in with pinniped: %v\n%s", err, stderr)
	}

	// What kubectl's call of the plugin for context dev then finds: the
	// same key (the entry's arguments, the cluster kubectl hands it).
	info := `{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false,"cluster":{"server":"https://10.0.0.1:6443"}}}`
	cred, stderr, err := execute(t, map[string]string{"KUBERNETES_EXEC_INFO": info, "XDG_CONFIG_HOME": config, "PINNIPED_USERNAME": "alice"},
		func(f *cmdutil.Factory) *cobra.Command { return NewCmdOIDC(f, nil) }, args[2:]...)
	if err != nil || cred.Status.Token == "" || idp.PasswordGrants.Load() != 1 {
		t.Fatalf("kubectl's call after the login ahead: %v, %d password grants\n%s", err, idp.PasswordGrants.Load(), stderr)
	}
}
