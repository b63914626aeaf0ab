package ui

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/plain"
)

func TestForLoginWithoutATerminal(t *testing.T) {
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	for _, interactive := range []bool{false, true} {
		var out bytes.Buffer
		l := ForLogin(LoginOptions{In: strings.NewReader("typed\n"), Out: &out, Interactive: interactive, Getenv: func(string) string { return "" }, Issuer: "https://dex", Cancel: cancel})
		lines, ok := l.View.(*plain.Login)
		if !ok || l.CanPrompt || lines.In != nil {
			t.Errorf("interactive=%v: %T, CanPrompt %v: want plain lines that never prompt", interactive, l.View, l.CanPrompt)
		}
		l.Warn("problem", "next")
		if out.String() != "! problem: next\n" {
			t.Errorf("interactive=%v: %q", interactive, out.String())
		}
		want := errors.New("boom")
		if err := l.Finish(want); err != want { //nolint:errorlint // the very error, not wrapped
			t.Errorf("Finish: %v", err)
		}
	}
}

// TestQuietRenewal: a login that needs no person (a refresh, an exchange)
// shows nothing, not even its outcome; a warning shows as Once allows; a
// login that needs the person shows the steps so far, the link and the
// outcome.
func TestQuietRenewal(t *testing.T) {
	shown := map[string]bool{}
	once := func(w string) bool {
		if shown[w] {
			return false
		}
		shown[w] = true
		return true
	}
	quietLogin := func(out *bytes.Buffer) *Login {
		return ForLogin(LoginOptions{Out: out, Getenv: func(string) string { return "" }, Open: func(string) error { return nil }, Quiet: true, Once: once})
	}

	var out bytes.Buffer
	l := quietLogin(&out)
	l.Step("refreshing your session")
	l.Step("exchanging the token for a cluster credential")
	l.Success(loginview.Summary{Username: "alice", Refreshed: true})
	if out.Len() != 0 {
		t.Fatalf("a silent renewal wrote %q", out.String())
	}
	l.Warn("could not cache the credential (disk full)", "the next call logs in again")
	l.Warn("could not cache the credential (disk full)", "the next call logs in again")
	if strings.Count(out.String(), "could not cache") != 1 {
		t.Fatalf("the warning, twice through Once: %q", out.String())
	}

	out.Reset()
	l = quietLogin(&out)
	l.Step("logging in")
	if err := l.OpenBrowser("https://dex/auth"); err != nil {
		t.Fatal(err)
	}
	l.ShowLoginURL("https://dex/auth")
	l.Step("exchanging the token for a cluster credential")
	l.Success(loginview.Summary{Username: "alice"})
	l.Warn("could not cache the credential (disk full)", "the next call logs in again")
	for _, want := range []string{"• logging in", "https://dex/auth", "• exchanging", "✓ Logged in as alice", "could not cache"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("a login that needed the person: %q lacks %q", out.String(), want)
		}
	}
	if strings.Index(out.String(), "• logging in") > strings.Index(out.String(), "https://dex/auth") {
		t.Errorf("the steps held back come after the link: %q", out.String())
	}
}
