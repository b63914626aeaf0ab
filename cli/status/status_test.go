package status

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/localproxy/state"
)

// TestNothingCachedNoProxy: an empty cache and no proxy say so.
func TestNothingCachedNoProxy(t *testing.T) {
	var out bytes.Buffer
	f := cmdutil.Test(nil, &out, &out, map[string]string{"XDG_CONFIG_HOME": t.TempDir()})
	cmd := NewCmdStatus(f, nil)
	cmd.SetArgs(nil)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"No cached credentials.", "pinniped proxy: not running (start it with `pinniped proxy`)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status said %q, want %q in it", out.String(), want)
		}
	}
}

// TestRunningProxy: a running proxy's contexts are listed with their
// credentials' expiry, and one whose credential expired says so rather
// than "expires in -5m".
func TestRunningProxy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proxy")
	run, err := state.Start(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Stop() })
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	if err := run.Write(&state.State{Address: "127.0.0.1:47443", Contexts: map[string]state.Context{
		"a": {Context: "prod", Server: "https://127.0.0.1:47443/ctx/a", State: "ready", Expires: now.Add(3 * time.Minute), Renewals: 2},
		"b": {Context: "staging", Server: "https://127.0.0.1:47443/ctx/b", State: "renewing", Expires: now.Add(-5 * time.Minute), Renewals: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printProxy(&out, dir, now); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"pinniped proxy: running", "2 contexts", "prod", "credential expires in 3m0s", "staging", "credential expired at"} {
		if !strings.Contains(got, want) {
			t.Errorf("status said %q, want %q in it", got, want)
		}
	}
	if strings.Contains(got, "-5m") {
		t.Errorf("status said %q: an expired credential as a negative duration", got)
	}
}
