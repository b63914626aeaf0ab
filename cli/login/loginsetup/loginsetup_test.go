package loginsetup

import "testing"

func TestLoginHint(t *testing.T) {
	for _, c := range []struct{ name, kubeconfig, want string }{
		{"", "", "pinniped login --context <the context your tool uses>"},
		{"dev", "", "pinniped login --context dev"},
		{"dev", "/home/a/fleet.kubeconfig", "pinniped login --context dev --kubeconfig /home/a/fleet.kubeconfig"},
		{"dev", "/a:/b", "pinniped login --context dev"},
		{"my cluster", "", "pinniped login --context 'my cluster'"},
		{"prod;x", "", "pinniped login --context 'prod;x'"},
		{"evil\nrm -rf /", "", `pinniped login --context 'evil\x0arm -rf /'`},
	} {
		env := map[string]string{"PINNIPED_CONTEXT": c.name, "KUBECONFIG": c.kubeconfig}
		if got := LoginHint(func(k string) string { return env[k] }); got != c.want {
			t.Errorf("%q %q: %q, want %q", c.name, c.kubeconfig, got, c.want)
		}
	}
}
