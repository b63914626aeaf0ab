package login_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/login"
)

// TestNoPromptStorm: a caller nobody watches (an IDE's kubectl) that
// starts a browser login which nobody finishes keeps the next such callers
// from opening another for the cool-off: they fail at once, saying a login
// is waiting, or was abandoned, and what to run. A person at a terminal is
// never held back, and a finished login ends the cool-off.
func TestNoPromptStorm(t *testing.T) {
	h := newHarness(t)
	h.ui.idle = true // nobody logs in in the browser
	unwatched := func() *login.Runner {
		e := h.engine(nil)
		e.LoginHint = "pinniped login --context dev"
		return e
	}
	attempt := func(e *login.Runner, timeout time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		_, err := e.CredentialOIDC(ctx, h.request(true), login.Request{})
		return time.Since(start), err
	}

	// A burst at once (an IDE starting up): one opens a browser and waits;
	// the others, some of which began waiting before it recorded its
	// login, fail fast.
	type result struct {
		took time.Duration
		err  error
	}
	results := make(chan result, 5)
	for range 5 {
		go func() { took, err := attempt(unwatched(), 3*time.Second); results <- result{took, err} }()
	}
	waiting, abandoned := 0, 0
	for range 5 {
		r := <-results
		switch {
		case errors.Is(r.err, login.ErrLoginWaiting):
			if !strings.Contains(r.err.Error(), "waiting in the browser") || !strings.Contains(r.err.Error(), "pinniped login --context dev") || r.took > 2500*time.Millisecond {
				t.Fatalf("a caller of the burst: %v after %v, want ErrLoginWaiting at once naming the command", r.err, r.took)
			}
			waiting++
		case r.err != nil:
			abandoned++ // the one that opened the browser, given up
		default:
			t.Fatal("a call succeeded although nobody logged in")
		}
	}
	if waiting != 4 || abandoned != 1 {
		t.Fatalf("%d waiting, %d abandoned of the burst, want 4 and 1", waiting, abandoned)
	}

	// Abandoned (its process gone): the next still opens no browser.
	for range 3 {
		if _, err := attempt(unwatched(), 30*time.Second); !errors.Is(err, login.ErrLoginWaiting) || !strings.Contains(err.Error(), "not finished") {
			t.Fatalf("after the abandoned login: %v", err)
		}
	}
	if n := h.ui.opened.Load(); n != 1 {
		t.Fatalf("%d browsers opened by callers nobody watches, want 1", n)
	}

	// A person at a terminal is not held back, and their login ends the
	// cool-off for everyone.
	h.ui.idle = false
	person := h.engine(nil)
	person.CanPrompt = true
	if _, err := attempt(person, 30*time.Second); err != nil {
		t.Fatalf("a person's login: %v", err)
	}
	if _, err := attempt(unwatched(), 30*time.Second); err != nil {
		t.Fatalf("after the person logged in: %v", err)
	}

	// And a cool-off ends by itself.
	h.clk.add(3 * time.Hour) // the session's tokens and the credential expire
	h.ui.idle = true
	h.idp.FailRefresh.Store(true)
	if _, err := attempt(unwatched(), time.Second); err == nil || errors.Is(err, login.ErrLoginWaiting) {
		t.Fatalf("a new login nobody finishes: %v", err)
	}
	opened := h.ui.opened.Load()
	h.clk.add(login.DefaultCoolOff)
	if _, err := attempt(unwatched(), time.Second); errors.Is(err, login.ErrLoginWaiting) || h.ui.opened.Load() != opened+1 {
		t.Fatalf("after the cool-off: %v, %d browsers (was %d)", err, h.ui.opened.Load(), opened)
	}
}
