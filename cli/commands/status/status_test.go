package status

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cache/credcache"
	"github.com/pinniped-kit/pinniped/cache/filestore"
	"github.com/pinniped-kit/pinniped/cache/sessions"
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

// TestGroupedBySession: credentials are listed under the session they came
// from (two clusters, one login), with what the session can still do;
// a static token's credential is listed apart.
func TestGroupedBySession(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	config := t.TempDir()
	store := &filestore.Store{Dir: filepath.Join(config, "pinniped", "credentials")}
	if err := (&sessions.Cache{Store: store}).Put(ctx, "sess-1", &sessions.Tokens{IDToken: "x", IDTokenExpiry: now.Add(time.Hour), RefreshToken: "r",
		Issuer: &sessions.Issuer{URL: "https://dex.example.com", ClientID: "pinniped-cli"}}); err != nil {
		t.Fatal(err)
	}
	creds := &credcache.Cache{Store: store, Now: func() time.Time { return now }}
	cred := func(d time.Duration) credcache.Credential {
		return credcache.Credential{Token: "t", ExpirationTimestamp: now.Add(d)}
	}
	for _, c := range []struct{ key, label, session string }{
		{"cred-a", "https://prod:6443 via https://dex.example.com", "sess-1"},
		{"cred-b", "https://staging:6443 via https://dex.example.com", "sess-1"},
		{"cred-c", "static token via https://agent", ""},
	} {
		if err := creds.PutFrom(ctx, c.key, c.label, c.session, cred(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	f := cmdutil.Test(nil, &out, &out, map[string]string{"XDG_CONFIG_HOME": config})
	f.Now = func() time.Time { return now }
	cmd := NewCmdStatus(f, nil)
	cmd.SetArgs(nil)
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	session := strings.Index(got, "Session at https://dex.example.com (client pinniped-cli)")
	prod, staging := strings.Index(got, "  https://prod:6443"), strings.Index(got, "  https://staging:6443")
	apart := strings.Index(got, "Credentials of no session")
	static := strings.Index(got, "  static token via")
	if session < 0 || prod < session || staging < session || apart < prod || apart < staging || static < apart ||
		!strings.Contains(got, "renewed without you") {
		t.Fatalf("status:\n%s", got)
	}
	if strings.Contains(got, "\"r\"") || strings.Contains(got, " t ") {
		t.Fatalf("status shows a token:\n%s", got)
	}
}
