package localproxy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/ui"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
)

// TestBackgroundRenewalShowsNoSteps: a background renewal's view shows
// none of the engine's progress, which names the user ("logging in as
// alice@... with a password") and would chatter at every renewal, but
// still shows a warning.
func TestBackgroundRenewalShowsNoSteps(t *testing.T) {
	var out bytes.Buffer
	v := ui.ForLogin(ui.LoginOptions{Out: &out, Getenv: func(string) string { return "" }})
	quiet := noSummary{v.View}
	quiet.Step("logging in as alice-the-user with a password")
	quiet.Success(loginview.Summary{Username: "alice-the-user"})
	quiet.Warn("the session could not be refreshed", "log in again")
	_ = v.Finish(nil)
	got := out.String()
	if strings.Contains(got, "alice-the-user") {
		t.Errorf("a background renewal named the user:\n%s", got)
	}
	if !strings.Contains(got, "could not be refreshed") {
		t.Errorf("a background renewal hid a warning:\n%s", got)
	}
}
