package oidclogin_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/localuser/localusertest"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
)

// TestMain lets localusertest run this binary as another user.
func TestMain(m *testing.M) {
	localusertest.Main()
	os.Exit(m.Run())
}

// TestFormPageRefusesAnotherUser: the page's URL is in command lines any
// local user can read, so another user who asks for it first gets a 403
// and nothing of the page, and the page is not spent: it is still served,
// once, to this user, and only that fetch ends the wait. Another user's
// request for any other path is a 404 and not counted as a refusal.
func TestFormPageRefusesAnotherUser(t *testing.T) {
	const token = "ID-TOKEN-of-the-victim"
	page, err := oidclogin.ServeFormPost(t.Context(), "https://issuer.example/end_session", url.Values{"id_token_hint": {token}, "client_id": {"pinniped-cli"}})
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()

	wrong, _ := url.Parse(page.URL)
	wrong.Path = "/not-the-page"
	if r := localusertest.GetAs(t, localusertest.Nobody, wrong.String()); r.Status != http.StatusNotFound {
		t.Errorf("another user at another path: %d %q, want 404", r.Status, r.Body)
	}
	if got := page.Refused(); got.Others != 0 || got.Unidentified != 0 {
		t.Errorf("a request at another path was counted as refused: %+v", got)
	}

	for range 2 {
		r := localusertest.GetAs(t, localusertest.Nobody, page.URL)
		if r.Err != "" {
			t.Fatalf("another user's request failed: %s", r.Err)
		}
		if r.Status != http.StatusForbidden || strings.Contains(r.Body, token) || strings.Contains(r.Body, "id_token_hint") || strings.Contains(r.Body, "<form") {
			t.Fatalf("another user got %d %q; want a 403 with nothing of the page", r.Status, r.Body)
		}
	}
	got := page.Refused()
	if got.Others != 2 || !slices.Equal(got.OtherUIDs, []int{localusertest.Nobody}) || got.Unidentified != 0 {
		t.Errorf("Refused = %+v; want 2 requests of uid %d", got, localusertest.Nobody)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := page.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait after only another user asked: %v; want it still waiting", err)
	}

	resp, err := http.Get(page.URL) //nolint:noctx // a test's browser
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), token) {
		t.Fatalf("this user got %d %q; want the page", resp.StatusCode, body)
	}
	if err := page.Wait(t.Context()); err != nil {
		t.Fatalf("Wait after this user fetched the page: %v", err)
	}
	if r := localusertest.GetAs(t, localusertest.Nobody, page.URL); r.Status != http.StatusForbidden || strings.Contains(r.Body, token) {
		t.Errorf("another user after the page was served: %d %q, want 403", r.Status, r.Body)
	}
}
