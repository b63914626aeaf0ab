package helperpod

import (
	"slices"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string // empty: valid
	}{
		{Settings{}, ""},
		{Settings{RunAsUser: 65532, RunAsGroup: 65532, Strategy: Recreate}, ""},
		{Settings{RunAsUser: maxID, RunAsGroup: maxID, Strategy: RollingUpdate}, ""},
		{Settings{RunAsUser: -1}, "--kube-cert-agent-run-as-user=-1"},
		{Settings{RunAsGroup: maxID + 1}, "--kube-cert-agent-run-as-group=2147483648"},
		{Settings{Strategy: "recreate"}, `--kube-cert-agent-deployment-strategy="recreate": want RollingUpdate or Recreate`},
	} {
		err := tc.s.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
}

// Only what differs from the default becomes a flag: an install that sets
// nothing renders the agent's arguments exactly as before.
func TestArgs(t *testing.T) {
	if args := (Settings{}).Args(); len(args) != 0 || !(Settings{}).IsDefault() {
		t.Errorf("default renders %q", args)
	}
	got := Settings{RunAsUser: 1000, Strategy: Recreate}.Args()
	want := []string{"--kube-cert-agent-run-as-user=1000", "--kube-cert-agent-deployment-strategy=Recreate"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
