package shellquote

import "testing"

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"dev": "dev", "/home/a/.kube/config": "/home/a/.kube/config", "": "''",
		"my cluster": "'my cluster'", "it's": `'it'\''s'`, "prod;rm -rf /": "'prod;rm -rf /'",
		"a&b": "'a&b'", "$HOME": "'$HOME'", "~root": "'~root'", "x|y": "'x|y'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}
