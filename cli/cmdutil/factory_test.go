package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pinniped-kit/pinniped/cache/filestore"
)

// TestRunE: prepare runs first and its error stops the command; a test's
// runF then replaces the options' own Run, and gets the same options.
func TestRunE(t *testing.T) {
	type opts struct{ n int }
	var calls []string
	o := &opts{}
	prepare := func() error { calls = append(calls, "prepare"); o.n = 1; return nil }
	run := func(context.Context) error { calls = append(calls, "run"); return nil }
	cmd := &cobra.Command{}
	if err := RunE(o, prepare, nil, run)(cmd, nil); err != nil || strings.Join(calls, ",") != "prepare,run" {
		t.Fatalf("without runF: %v, calls %v", err, calls)
	}
	calls = nil
	var seen *opts
	runF := func(_ context.Context, got *opts) error { calls = append(calls, "runF"); seen = got; return nil }
	if err := RunE(o, prepare, runF, run)(cmd, nil); err != nil || strings.Join(calls, ",") != "prepare,runF" || seen != o || seen.n != 1 {
		t.Fatalf("with runF: %v, calls %v", err, calls)
	}
	calls = nil
	bad := errors.New("bad flags")
	if err := RunE(o, func() error { calls = append(calls, "prepare"); return bad }, runF, run)(cmd, nil); !errors.Is(err, bad) || strings.Join(calls, ",") != "prepare" {
		t.Fatalf("a failing prepare: %v, calls %v", err, calls)
	}
	if err := RunE(o, nil, nil, run)(cmd, nil); err != nil {
		t.Fatalf("no prepare: %v", err)
	}
}

// TestTestFactoryStaysInTheTest: the test Factory never reads the person's
// kubeconfig, environment or caches: without a KUBECONFIG of the test's
// own no kubeconfig loads, without an XDG_CONFIG_HOME only "none" caches,
// and with one every mode (keyring too) is files under it.
func TestTestFactoryStaysInTheTest(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "the-persons-kubeconfig"))
	t.Setenv("SOME_VAR", "the person's")
	var out bytes.Buffer
	f := Test(nil, &out, &out, nil)
	if f.Getenv("SOME_VAR") != "" {
		t.Error("the test Factory reads the process's environment")
	}
	if raw, err := f.KubeConfig("", "").RawConfig(); err == nil && len(raw.Contexts) != 0 {
		t.Error("the test Factory loaded a kubeconfig it was not given")
	}
	if _, err := f.Caches.Open("keyring", &out); err == nil {
		t.Error("a keyring cache without XDG_CONFIG_HOME")
	}
	if st, err := f.Caches.Open("none", &out); err != nil || st != nil {
		t.Errorf("none: %v, %v", st, err)
	}

	dir := t.TempDir()
	f = Test(nil, &out, &out, map[string]string{"XDG_CONFIG_HOME": dir})
	for _, mode := range []string{"keyring", "file"} {
		st, err := f.Caches.Open(mode, &out)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		fs, ok := st.(*filestore.Store)
		if !ok || !strings.HasPrefix(fs.Dir, dir) {
			t.Errorf("%s: %T %+v, want files under the test's XDG_CONFIG_HOME", mode, st, st)
		}
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: x}\nclusters:\n- name: x\n  cluster: {server: https://x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f = Test(nil, &out, &out, map[string]string{"KUBECONFIG": kc})
	if raw, err := f.KubeConfig("", "").RawConfig(); err != nil || raw.CurrentContext != "c" {
		t.Errorf("the test's own KUBECONFIG: %v, %v", raw.CurrentContext, err)
	}
}
