package fastlogin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pinniped-kit/pinniped/cache/privatedir"
	"github.com/pinniped-kit/pinniped/cli/front/fastlogin"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
)

// TestProxyCredential: the front answers the proxy kubeconfig's exec entry
// with the running proxy's secret, in the version kubectl asked for and
// without expiry; once the proxy stops (its secret file left behind, as a
// killed proxy would), it answers nothing and leaves the error to the engine.
func TestProxyCredential(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proxy")
	run, err := state.Start(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := run.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_EXEC_INFO", fmt.Sprintf(execInfoFmt, "v1beta1"))
	for _, args := range [][]string{
		{"proxy", "credential", "--state-dir", dir},
		{"proxy", "credential", "--state-dir=" + dir},
	} {
		var out bytes.Buffer
		if !fastlogin.Answer(args, env, &out) {
			t.Fatalf("%v: not answered while the proxy runs", args)
		}
		var ec struct {
			APIVersion string         `json:"apiVersion"`
			Status     map[string]any `json:"status"`
		}
		if err := json.Unmarshal(out.Bytes(), &ec); err != nil || ec.APIVersion != "client.authentication.k8s.io/v1beta1" ||
			len(ec.Status) != 1 || ec.Status["token"] != string(secret) {
			t.Errorf("%v: %s (%v); want a v1beta1 ExecCredential with only the secret as token", args, out.String(), err)
		}
	}
	for _, args := range [][]string{
		{"proxy", "credential"},
		{"proxy", "credential", "--state-dir", "relative"},
		{"proxy", "credential", "--state-dir", dir, "--extra"},
		{"proxy", "other", "--state-dir", dir},
		// Not a command of pinniped: the engine says so.
		{"login", "credential", "--state-dir", dir},
	} {
		var out bytes.Buffer
		if fastlogin.Answer(args, env, &out) || out.Len() != 0 {
			t.Errorf("%v: answered %q; the engine must", args, out.String())
		}
	}

	// A proxy that died: the lock is free, the secret still there.
	kept, err := state.ReadSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := privatedir.WriteFile(dir, state.SecretFile, kept); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if fastlogin.Answer([]string{"proxy", "credential", "--state-dir", dir}, env, &out) || out.Len() != 0 {
		t.Errorf("answered %q for a proxy that is not running", out.String())
	}
}
