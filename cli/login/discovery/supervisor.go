package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/pinniped-kit/pinniped/cli/httpclient"
)

// IdentityProvider is one identity provider a Pinniped Supervisor lists;
// its first flow is its default.
type IdentityProvider struct {
	Name  string   `json:"name"`
	Type  string   `json:"type"`
	Flows []string `json:"flows,omitempty"`
}

// IdentityProviders is a Supervisor's list, and the provider types it
// supports (empty when it does not say).
type IdentityProviders struct {
	Providers []IdentityProvider
	Types     []string
}

// IdentityProviders reads the Supervisor's list with client.
func (d *Document) IdentityProviders(ctx context.Context, client *http.Client) (*IdentityProviders, error) {
	if !d.IsSupervisor() {
		return nil, fmt.Errorf("the issuer %s does not appear to be a Pinniped Supervisor (its discovery lists no identity providers)", d.Issuer)
	}
	endpoint := d.Supervisor.IdentityProvidersEndpoint
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := httpclient.Do(client, req)
	if err != nil {
		return nil, fmt.Errorf("list the Supervisor's identity providers: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list the Supervisor's identity providers at %s: HTTP %d", endpoint, resp.StatusCode)
	}
	var list struct {
		IDPs  []IdentityProvider `json:"pinniped_identity_providers"`
		Types []struct {
			Type string `json:"type"`
		} `json:"pinniped_supported_identity_provider_types"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(&list); err != nil {
		return nil, fmt.Errorf("the Supervisor's list of identity providers at %s is unreadable: %w", endpoint, err)
	}
	out := &IdentityProviders{Providers: list.IDPs}
	for _, t := range list.Types {
		out.Types = append(out.Types, t.Type)
	}
	return out, nil
}

// Find is the providers with this name and type; an empty one matches any.
func (l *IdentityProviders) Find(name, typ string) []IdentityProvider {
	var out []IdentityProvider
	for _, p := range l.Providers {
		if (name == "" || p.Name == name) && (typ == "" || p.Type == typ) {
			out = append(out, p)
		}
	}
	return out
}

// SupportsType reports whether the Supervisor supports providers of typ
// (true when it does not say).
func (l *IdentityProviders) SupportsType(typ string) bool {
	return len(l.Types) == 0 || slices.Contains(l.Types, typ)
}

// String is the list as JSON, for error messages that must show a person
// what exists.
func (l *IdentityProviders) String() string {
	b, _ := json.Marshal(l.Providers)
	return string(b)
}
