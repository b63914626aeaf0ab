package logout

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/localuser/localusertest"
)

// TestMain lets localusertest run this binary as another user.
func TestMain(m *testing.M) {
	localusertest.Main()
	os.Exit(m.Run())
}

// TestLogoutEndSessionRefusesAnotherUser: the end-session page's URL is in
// the opener's command line, which every local user can read. Another user
// who asks for it first gets a 403 without the ID token; if the person's
// browser never loads it, logout says the session was NOT ended and
// fails, and only once the person's own browser loads it does logout say
// it sent the browser there. Either way the person is told another user
// asked.
func TestLogoutEndSessionRefusesAnotherUser(t *testing.T) {
	ti := newTestIssuer(t)
	ti.RevocationEndpoint = ti.URL + "/revoke"
	ti.EndSessionEndpoint = ti.URL + "/end_session"
	args := ti.args()
	kr, _, kubeconfig := setup(t, args, nil)
	defer func(d time.Duration) { endSessionWait = d }(endSessionWait)
	endSessionWait = 200 * time.Millisecond

	// The other user wins the race, as one polling /proc would.
	anotherUserFirst := func(t *testing.T, u string) {
		t.Helper()
		r := localusertest.GetAs(t, localusertest.Nobody, u)
		if r.Err != "" {
			t.Fatalf("another user's request failed: %s", r.Err)
		}
		if r.Status != http.StatusForbidden || strings.Contains(r.Body, "ID-TOKEN-xyz") || strings.Contains(r.Body, "id_token_hint") {
			t.Errorf("another user got %d %q; want a 403 without the ID token", r.Status, r.Body)
		}
	}
	const warned = "refused 1 request(s) from other local users (uid 65534): none of them got the page or your ID token"

	// Only the other user asks: nothing was ended, and logout fails.
	cacheSession(t, kr, args, session())
	out, err := runLogout(t, func(u string) error { anotherUserFirst(t, u); return nil }, "--kubeconfig="+kubeconfig, "--end-session")
	if err == nil {
		t.Errorf("logout succeeded though only another user asked for the page:\n%s", out)
	}
	for _, want := range []string{warned, ti.URL + ": your session there was NOT ended: your browser did not load the page that ends it within 200ms", "sign out there (its logout page is " + ti.EndSessionEndpoint + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("did not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Your browser was sent") {
		t.Errorf("said the browser was sent, though it never loaded the page:\n%s", out)
	}
	noTokenIn(t, out)

	// The other user asks first, then the person's own browser: the page
	// is still there for it, and only now is the session said ended.
	cacheSession(t, kr, args, session())
	var page fetchedPage
	out, err = runLogout(t, func(u string) error {
		anotherUserFirst(t, u)
		page = browse(t, u)
		return nil
	}, "--kubeconfig="+kubeconfig, "--end-session")
	if err != nil {
		t.Fatalf("logout after the person's own browser loaded the page: %v\n%s", err, out)
	}
	if page.form.Get("id_token_hint") != "ID-TOKEN-xyz" || page.action != ti.EndSessionEndpoint {
		t.Errorf("the person's browser got a page posting %v to %s", page.form, page.action)
	}
	if !strings.Contains(out, warned) || !strings.Contains(out, "Your browser was sent to end your session at "+ti.URL) || strings.Contains(out, "NOT ended") {
		t.Errorf("said:\n%s", out)
	}
	noTokenIn(t, out)
}
