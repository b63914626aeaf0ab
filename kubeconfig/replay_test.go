package kubeconfig_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/kubeconfig"
)

func TestSharedTokens(t *testing.T) {
	const dex = "https://dex.example.com"
	id := func(ctx, aud string) kubeconfig.Presented {
		return kubeconfig.Presented{Context: ctx, Issuer: dex, Audience: aud, Token: kubeconfig.IDToken}
	}
	exchanged := func(ctx, aud string) kubeconfig.Presented {
		return kubeconfig.Presented{Context: ctx, Issuer: dex, Audience: aud, Token: kubeconfig.ExchangedToken}
	}
	for name, tc := range map[string]struct {
		in   []kubeconfig.Presented
		want []kubeconfig.SharedToken
	}{
		"two contexts, one issuer and audience": {
			in:   []kubeconfig.Presented{id("b", "pinniped-cli"), id("a", "pinniped-cli")},
			want: []kubeconfig.SharedToken{{Issuer: dex, Audience: "pinniped-cli", Token: kubeconfig.IDToken, Contexts: []string{"a", "b"}}},
		},
		"different audiences": {
			in: []kubeconfig.Presented{id("a", "cluster-a"), id("b", "cluster-b")},
		},
		"different issuers": {
			in: []kubeconfig.Presented{id("a", "pinniped-cli"), {Context: "b", Issuer: "https://other.example.com", Audience: "pinniped-cli", Token: kubeconfig.IDToken}},
		},
		// One client ID (one ID-token audience) for both, but each cluster
		// is shown a token the Supervisor minted for its audience alone.
		"one client, a token exchange for each cluster's audience": {
			in: []kubeconfig.Presented{exchanged("a", "cluster-a"), exchanged("b", "cluster-b")},
		},
		// The exchange asks both clusters' audience alike: its token is
		// good at both.
		"a token exchange for one audience": {
			in:   []kubeconfig.Presented{exchanged("a", "fleet"), exchanged("b", "fleet")},
			want: []kubeconfig.SharedToken{{Issuer: dex, Audience: "fleet", Token: kubeconfig.ExchangedToken, Contexts: []string{"a", "b"}}},
		},
		"three contexts, two share": {
			in:   []kubeconfig.Presented{id("prod", "pinniped-cli"), exchanged("staging", "staging"), id("dev", "pinniped-cli")},
			want: []kubeconfig.SharedToken{{Issuer: dex, Audience: "pinniped-cli", Token: kubeconfig.IDToken, Contexts: []string{"dev", "prod"}}},
		},
		"static tokens have no issuer": {
			in: []kubeconfig.Presented{{Context: "a"}, {Context: "b"}},
		},
		"one context": {
			in: []kubeconfig.Presented{id("a", "pinniped-cli")},
		},
		"two sets, sorted": {
			in: []kubeconfig.Presented{id("d", "y"), id("a", "x"), id("c", "y"), id("b", "x")},
			want: []kubeconfig.SharedToken{
				{Issuer: dex, Audience: "x", Token: kubeconfig.IDToken, Contexts: []string{"a", "b"}},
				{Issuer: dex, Audience: "y", Token: kubeconfig.IDToken, Contexts: []string{"c", "d"}},
			},
		},
		"an ID token and an access token of one audience": {
			in:   []kubeconfig.Presented{id("a", "api"), {Context: "b", Issuer: dex, Audience: "api", Token: kubeconfig.AccessToken}},
			want: []kubeconfig.SharedToken{{Issuer: dex, Audience: "api", Contexts: []string{"a", "b"}}},
		},
	} {
		if got := kubeconfig.SharedTokens(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", name, got, tc.want)
		}
	}
}

func TestSharedTokenWarning(t *testing.T) {
	s := kubeconfig.SharedToken{Issuer: "https://dex.example.com", Audience: "pinniped-cli", Token: kubeconfig.IDToken, Contexts: []string{"a", "b"}}
	want := "warning: contexts a, b accept the same ID token (issuer https://dex.example.com, audience pinniped-cli): a token sent to one can be replayed at the others by whoever sees it there; give each cluster its own audience (a Pinniped Supervisor's token exchange) to stop that"
	if got := s.Warning(nil); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	s.Token, s.Audience = kubeconfig.ExchangedToken, "fleet"
	if got := s.Warning(nil); !strings.Contains(got, "the same exchanged token (issuer https://dex.example.com, audience fleet)") ||
		!strings.Contains(got, "its own spec.audience") {
		t.Errorf("an exchange for one audience: %s", got)
	}
	// What came from a cluster goes through visible.
	s.Audience = "evil\x1b[2J"
	if got := s.Warning(func(v string) string { return strings.ReplaceAll(v, "\x1b", `\x1b`) }); strings.Contains(got, "\x1b") {
		t.Errorf("an escape reached the terminal: %q", got)
	}
}
