package localproxy

import (
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/localproxy/renew"
)

// TestNewsLines: a context failing the same way at every retry prints its
// problem once; a new problem, a login needed, and each new credential
// print a line.
func TestNewsLines(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.Local)
	refused := "could not get a credential: the cluster refused the token"
	steps := []struct {
		i    renew.Info
		want string
	}{
		{renew.Info{State: renew.Renewing, Message: "getting a new credential"}, ""},
		{renew.Info{State: renew.Failed, Message: refused + " (next try in 5s)"}, "failed: " + refused + " (next try in 5s)"},
		{renew.Info{State: renew.Renewing, Message: "getting a new credential; the last try failed: " + refused}, ""},
		{renew.Info{State: renew.Failed, Message: refused + " (next try in 10s)"}, ""},
		{renew.Info{State: renew.Renewing}, ""},
		{renew.Info{State: renew.Failed, Message: "could not get a credential: no route (next try in 20s)"}, "failed: could not get a credential: no route (next try in 20s)"},
		{renew.Info{State: renew.Renewing}, ""},
		{renew.Info{State: renew.NeedsPerson, Message: "a login is needed"}, "needs login: a login is needed"},
		{renew.Info{State: renew.Renewing}, ""},
		{renew.Info{State: renew.Ready, Renewals: 1, Expires: exp}, "new credential (#1), valid until " + exp.Format(time.TimeOnly)},
		{renew.Info{State: renew.Ready, Renewals: 1, Expires: exp, Message: "getting a new credential"}, ""},
		{renew.Info{State: renew.Ready, Renewals: 2}, "credential ready (no expiry)"},
	}
	var n news
	for k, s := range steps {
		if got := n.line(s.i); got != s.want {
			t.Errorf("step %d (%v %q): printed %q, want %q", k, s.i.State, s.i.Message, got, s.want)
		}
	}
}
