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

// phases records the calls of Options' phases.
type phases struct {
	calls         []string
	failComplete  error
	failValidate  error
	completedWith int
}

func (p *phases) Complete() error {
	p.calls = append(p.calls, "complete")
	p.completedWith = 1
	return p.failComplete
}

func (p *phases) Validate() error { p.calls = append(p.calls, "validate"); return p.failValidate }

func (p *phases) Run(context.Context) error { p.calls = append(p.calls, "run"); return nil }

// TestRunE: Complete, Validate, Run in that order, each error stopping
// the command; a test's runF replaces Run and gets the completed options.
func TestRunE(t *testing.T) {
	cmd := &cobra.Command{}
	o := &phases{}
	if err := RunE(o, nil)(cmd, nil); err != nil || strings.Join(o.calls, ",") != "complete,validate,run" {
		t.Fatalf("without runF: %v, calls %v", err, o.calls)
	}
	o = &phases{}
	var seen *phases
	runF := func(_ context.Context, got *phases) error {
		got.calls = append(got.calls, "runF")
		seen = got
		return nil
	}
	if err := RunE(o, runF)(cmd, nil); err != nil || strings.Join(o.calls, ",") != "complete,validate,runF" || seen != o || seen.completedWith != 1 {
		t.Fatalf("with runF: %v, calls %v", err, o.calls)
	}
	bad := errors.New("bad flags")
	o = &phases{failComplete: bad}
	if err := RunE(o, runF)(cmd, nil); !errors.Is(err, bad) || strings.Join(o.calls, ",") != "complete" {
		t.Fatalf("a failing Complete: %v, calls %v", err, o.calls)
	}
	o = &phases{failValidate: bad}
	if err := RunE(o, runF)(cmd, nil); !errors.Is(err, bad) || strings.Join(o.calls, ",") != "complete,validate" {
		t.Fatalf("a failing Validate: %v, calls %v", err, o.calls)
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

// TestWithEnv: another environment's world reads that environment, and its
// caches and configuration directory are the ones it names.
func TestWithEnv(t *testing.T) {
	mine, theirs := t.TempDir(), t.TempDir()
	f := Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, map[string]string{"XDG_CONFIG_HOME": mine, "A": "1"})
	env := map[string]string{"XDG_CONFIG_HOME": theirs, "B": "2"}
	g := f.WithEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if g.Getenv("B") != "2" || g.Getenv("A") != "" || f.Getenv("B") != "" {
		t.Fatalf("environments: theirs B=%q A=%q, mine B=%q", g.Getenv("B"), g.Getenv("A"), f.Getenv("B"))
	}
	for _, c := range []struct {
		f    *Factory
		want string
	}{{f, mine}, {g, theirs}} {
		dir, err := c.f.Caches.ConfigDir()
		if err != nil || dir != filepath.Join(c.want, "pinniped") {
			t.Errorf("config dir %q, %v; want under %s", dir, err, c.want)
		}
	}
}

// TestWithEnvKeepsCachesOfTheSameDirectory: an environment naming the same
// configuration directory keeps the Factory's caches, a test's fake too.
func TestWithEnvKeepsCachesOfTheSameDirectory(t *testing.T) {
	dir := t.TempDir()
	f := Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, map[string]string{"XDG_CONFIG_HOME": dir})
	fake := noCaches{}
	f.Caches = fake
	g := f.WithEnv(func(k string) (string, bool) {
		if k == "XDG_CONFIG_HOME" {
			return dir, true
		}
		return "", false
	})
	if g.Caches != Caches(fake) {
		t.Fatalf("the same directory got other caches: %#v", g.Caches)
	}
}
