package getkubeconfig

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/discovery"
	"github.com/pinniped-kit/pinniped/cli/ui"
)

// issuerSide fills in what depends on the kind of issuer: the scopes, and
// for a Pinniped Supervisor the identity provider and flow behind it.
func (o *Options) issuerSide(ctx context.Context, client *http.Client, disc *discovery.Document, c *config.OIDC) error {
	if !disc.IsSupervisor() {
		if c.Upstream != (config.Upstream{}) {
			return fmt.Errorf("--upstream-identity-provider-* choose an identity provider behind a Pinniped Supervisor, and %s is not one; leave them out", c.Issuer)
		}
		c.Scopes, _ = disc.SupportedScopes(c.Scopes)
		return nil
	}
	c.Scopes = supervisorScopes(c.Scopes, disc.ScopesSupported, c.RequestAudience != "")
	up, err := o.chooseUpstream(ctx, client, disc, c.Upstream)
	if err != nil {
		return err
	}
	c.Upstream = up
	return nil
}

// supervisorScopes are the scopes asked of a Supervisor. As upstream,
// username and groups are left out, both together, when the Supervisor
// does not list both (an old one refuses them), and
// pinniped:request-audience is never left out; it is added when the login
// exchanges its token for the cluster's audience, which the Supervisor
// refuses without it.
func supervisorScopes(asked, supported []string, exchange bool) []string {
	old := len(supported) > 0 && (!slices.Contains(supported, config.ScopeUsername) || !slices.Contains(supported, config.ScopeGroups))
	var out []string
	for _, s := range asked {
		if (s == config.ScopeUsername || s == config.ScopeGroups) && old {
			continue
		}
		out = append(out, s)
	}
	if exchange && !slices.Contains(out, config.ScopeRequestAudience) {
		out = append(out, config.ScopeRequestAudience)
	}
	return out
}

// chooseUpstream picks the identity provider as upstream's get kubeconfig
// does: all three flags given are taken as they are; else the flags given
// must match exactly one of the Supervisor's providers, and the flow must
// be one it offers (its first by default). Where upstream refuses an
// ambiguous choice, a person at a terminal is asked instead.
func (o *Options) chooseUpstream(ctx context.Context, client *http.Client, disc *discovery.Document, given config.Upstream) (config.Upstream, error) {
	if given.Name != "" && given.Type != "" && given.Flow != "" {
		return given, nil
	}
	list, err := disc.IdentityProviders(ctx, client)
	if err != nil {
		return config.Upstream{}, err
	}
	if len(list.Providers) == 0 {
		if given != (config.Upstream{}) {
			return config.Upstream{}, fmt.Errorf("the Supervisor %s lists no identity providers, so --upstream-identity-provider-* cannot choose one", disc.Issuer)
		}
		return config.Upstream{}, nil // a Supervisor with one provider, unnamed
	}
	matches := list.Find(given.Name, given.Type)
	var chosen discovery.IdentityProvider
	switch len(matches) {
	case 0:
		return config.Upstream{}, fmt.Errorf("no Supervisor upstream identity providers with name %q and type %q were found; it has %s", given.Name, given.Type, list)
	case 1:
		chosen = matches[0]
	default:
		if chosen, err = o.pickUpstream(matches); err != nil {
			return config.Upstream{}, err
		}
	}
	flow := given.Flow
	switch {
	case flow != "" && len(chosen.Flows) > 0 && !slices.Contains(chosen.Flows, flow):
		return config.Upstream{}, fmt.Errorf("the identity provider %q (%s) offers the flows %s, not %q", chosen.Name, chosen.Type, strings.Join(chosen.Flows, ", "), flow)
	case flow == "" && len(chosen.Flows) > 0:
		flow = chosen.Flows[0]
	}
	return config.Upstream{Name: chosen.Name, Type: chosen.Type, Flow: flow}, nil
}

func (o *Options) pickUpstream(matches []discovery.IdentityProvider) (discovery.IdentityProvider, error) {
	items := make([]string, len(matches))
	for i, m := range matches {
		items[i] = fmt.Sprintf("%s (%s)", m.Name, m.Type)
	}
	n, err := ui.Choose(o.In, o.ErrOut, o.f.Getenv, "The Supervisor has several identity providers. Which one should users log in with?", items)
	if errors.Is(err, ui.ErrNotATerminal) {
		b := &discovery.IdentityProviders{Providers: matches}
		return discovery.IdentityProvider{}, fmt.Errorf("multiple Supervisor upstream identity providers were found (%s); choose one with --upstream-identity-provider-name and --upstream-identity-provider-type", b)
	}
	if err != nil {
		return discovery.IdentityProvider{}, fmt.Errorf("choose an identity provider: %w", err)
	}
	return matches[n], nil
}
