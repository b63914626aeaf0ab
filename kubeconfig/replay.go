package kubeconfig

import (
	"fmt"
	"slices"
	"strings"
)

// Token is which token a login shows its cluster.
type Token string

// The tokens a login can show a cluster.
const (
	IDToken     Token = "ID token"
	AccessToken Token = "access token"
	// ExchangedToken is the token a Pinniped Supervisor's token exchange
	// (RFC 8693) mints for the audience the login asks for.
	ExchangedToken Token = "exchanged token"
)

// Presented is the token one context's login shows its cluster, as a
// cluster's JWT authenticator judges it: by its issuer and audience.
type Presented struct {
	Context string
	Issuer  string
	// Audience is the aud of the token the cluster is shown: the client ID
	// for the ID token itself, the requested audience for an exchanged
	// token, the JWTAuthenticator's for an access token. Empty when
	// nothing here knows it (an access token shown to an API server that
	// trusts the issuer itself).
	Audience string
	Token    Token
}

// SharedToken is a set of contexts whose clusters accept one token:
// whoever sees it at one of them (its admin, a compromised agent there,
// its audit log) can replay it at the others as the user.
type SharedToken struct {
	Issuer, Audience string
	Token            Token // "" when the contexts are shown different kinds
	Contexts         []string
}

// SharedTokens finds, among the contexts of one kubeconfig, those whose
// clusters accept the same token. A JWT authenticator takes any token of
// its issuer that carries its audience, whichever way the token was got,
// so only a token exchange asking a different audience for each cluster
// keeps a token good at one cluster alone; a shared client ID does not
// matter then. Contexts without an issuer (a static token) are left out.
// Contexts are sorted, the sets by issuer and audience.
func SharedTokens(contexts []Presented) []SharedToken {
	type key struct{ issuer, audience string }
	groups := map[key]*SharedToken{}
	for _, p := range contexts {
		if p.Issuer == "" {
			continue
		}
		k := key{p.Issuer, p.Audience}
		g := groups[k]
		if g == nil {
			g = &SharedToken{Issuer: p.Issuer, Audience: p.Audience, Token: p.Token}
			groups[k] = g
		}
		if g.Token != p.Token {
			g.Token = ""
		}
		if !slices.Contains(g.Contexts, p.Context) {
			g.Contexts = append(g.Contexts, p.Context)
		}
	}
	var out []SharedToken
	for _, g := range groups {
		if len(g.Contexts) < 2 {
			continue
		}
		slices.Sort(g.Contexts)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b SharedToken) int {
		if c := strings.Compare(a.Issuer, b.Issuer); c != 0 {
			return c
		}
		return strings.Compare(a.Audience, b.Audience)
	})
	return out
}

// Warning is what to tell whoever writes such a kubeconfig: which
// contexts, why it matters, and what stops it. It names the issuer and
// the audience, never a user or a token. visible makes a value that came
// from a cluster safe to print (nil: printed as it is).
func (s SharedToken) Warning(visible func(string) string) string {
	if visible == nil {
		visible = func(v string) string { return v }
	}
	names := make([]string, len(s.Contexts))
	for i, c := range s.Contexts {
		names[i] = visible(c)
	}
	audience := "audience " + visible(s.Audience)
	if s.Audience == "" {
		audience = "the same audience"
	}
	token := string(s.Token)
	if token == "" {
		token = "token"
	}
	fix := "give each cluster its own audience (a Pinniped Supervisor's token exchange) to stop that"
	if s.Token == ExchangedToken {
		// The exchange is in place but asks every cluster's audience
		// alike: their JWTAuthenticators share spec.audience.
		fix = "give each cluster's JWTAuthenticator its own spec.audience, so that the Supervisor's token exchange mints a token for each cluster alone, to stop that"
	}
	return fmt.Sprintf("warning: contexts %s accept the same %s (issuer %s, %s): a token sent to one can be replayed at the others by whoever sees it there; %s",
		strings.Join(names, ", "), token, visible(s.Issuer), audience, fix)
}
