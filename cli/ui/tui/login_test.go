package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/plain"
)

func newTestLogin(cancel context.CancelCauseFunc) (*Login, *syncBuf, *syncBuf) {
	var screen, plainOut syncBuf
	l := NewLogin(LoginOptions{
		Out: &screen, Issuer: issuer, Cancel: cancel, Plain: &plain.Login{Err: &plainOut},
		Getenv: func(k string) string {
			if k == "BROWSER" {
				return "true"
			}
			return ""
		},
		programOptions: testProgram(),
	})
	return l, &screen, &plainOut
}

// TestLoginStaysPlainUntilNeeded: a refresh (progress, then success) never
// starts the screen; what it prints is the plain renderer's.
func TestLoginStaysPlainUntilNeeded(t *testing.T) {
	l, screen, plain := newTestLogin(nil)
	l.Step("refreshing your session")
	l.Success(loginview.Summary{Username: "alice", Refreshed: true, StoredIn: "the OS keyring", Expires: time.Now().Add(time.Hour)})
	if err := l.Finish(nil); err != nil {
		t.Fatal(err)
	}
	if screen.String() != "" {
		t.Fatalf("the screen drew: %q", screen.String())
	}
	if !strings.Contains(plain.String(), "• refreshing your session") || !strings.Contains(plain.String(), "✓ Session refreshed as alice") {
		t.Fatalf("plain output: %q", plain.String())
	}
}

func TestLoginScreenLifecycle(t *testing.T) {
	l, screen, plain := newTestLogin(nil)
	l.Step("discovering the issuer") // before the screen: plain
	l.ShowLoginURL(authURL)
	if err := l.OpenBrowser(authURL); err != nil {
		t.Fatal(err)
	}
	l.Step("waiting for you to log in")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := l.PromptCode(ctx, "paste"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the prompt should end with its context, got %v", err)
	}
	l.Success(loginview.Summary{Username: "alice@example.com", StoredIn: "the OS keyring", Expires: time.Now().Add(time.Hour)})
	if err := l.Finish(nil); err != nil {
		t.Fatal(err)
	}
	s := ansi.Strip(screen.String())
	for _, want := range []string{authURL, "logging in to " + issuer, "✓ Logged in as alice@example.com", "cached   the OS keyring"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(plain.String(), "discovering the issuer") || strings.Contains(plain.String(), "waiting") {
		t.Fatalf("plain output: %q", plain.String())
	}
}

func TestLoginFinishWithErrorIsShownOnce(t *testing.T) {
	l, screen, _ := newTestLogin(nil)
	l.ShowDeviceCode("https://dex/device", "ABCD-EFGH", "")
	err := l.Finish(fmt.Errorf("%w: expired_token", loginview.ErrDeviceLogin))
	var shown interface{ AlreadyShown() bool }
	if !errors.As(err, &shown) || !strings.Contains(err.Error(), "expired_token") {
		t.Fatalf("want a shown error, got %#v", err)
	}
	// After the screen has ended, in plain lines: the terminal may have
	// cleared the last frame, or never drawn it.
	s := ansi.Strip(screen.String())
	tail := s[strings.LastIndex(s, "✗"):]
	if !strings.HasPrefix(tail, "✗ Login failed: device login: expired_token\n  Next: the code may have expired") || strings.Count(s, "expired_token") != 1 {
		t.Fatalf("screen:\n%q", s)
	}
}
