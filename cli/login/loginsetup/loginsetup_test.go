package loginsetup

import "testing"

func TestLoginHint(t *testing.T) {
	for name, want := range map[string]string{
		"":           "pinniped login",
		"dev":        "pinniped login --context dev",
		"my cluster": "pinniped login --context 'my cluster'",
		"it's":       `pinniped login --context 'it'\''s'`,
	} {
		if got := LoginHint(func(string) string { return name }); got != want {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
}
