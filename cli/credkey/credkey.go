// Package credkey derives the cache keys of `pinniped login`: canonical and
// versioned (see credcache.Key), the same for any flag order or map
// contents. The lean front binary and the engine both use it, so a
// credential the engine cached is exactly the one the front finds.
package credkey

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/pinniped-kit/pinniped/cache/credcache"
)

// Inputs are everything that determines a cluster credential. Two runs with
// the same inputs may share it, however their flags were ordered.
type Inputs struct {
	Issuer          string
	ClientID        string
	Scopes          []string
	RequestAudience string
	CABundle        []byte // the issuer's
	// Concierge is nil when the ID token itself is the credential.
	Concierge *Concierge
	// ClusterServer and ClusterCA come from KUBERNETES_EXEC_INFO.
	ClusterServer string
	ClusterCA     []byte
	StaticToken   string
}

// Concierge is where a token is exchanged.
type Concierge struct {
	Endpoint, APIGroupSuffix, AuthenticatorType, AuthenticatorName string
	CABundle                                                       []byte
}

// wire is the hashed form; its JSON is the key's contents, so its field
// names must not change (cached credentials would be orphaned).
type wire struct {
	Issuer          string   `json:"issuer"`
	ClientID        string   `json:"clientID"`
	Scopes          []string `json:"scopes"`
	RequestAudience string   `json:"requestAudience,omitempty"`
	CABundleHash    string   `json:"caBundle,omitempty"`
	Concierge       *struct {
		Endpoint, Suffix, Type, Name, CAHash string
	} `json:"concierge,omitempty"`
	ClusterServer string `json:"clusterServer,omitempty"`
	ClusterCAHash string `json:"clusterCA,omitempty"`
	StaticToken   string `json:"staticTokenHash,omitempty"`
}

// Credential is the cache key of the cluster credential for in.
func Credential(in Inputs) (string, error) {
	w := wire{Issuer: in.Issuer, ClientID: in.ClientID, Scopes: canonical(in.Scopes), RequestAudience: in.RequestAudience,
		CABundleHash: hashOf(in.CABundle), ClusterServer: in.ClusterServer, ClusterCAHash: hashOf(in.ClusterCA)}
	if in.StaticToken != "" {
		w.StaticToken = hashOf([]byte(in.StaticToken))
	}
	if c := in.Concierge; c != nil {
		w.Concierge = &struct{ Endpoint, Suffix, Type, Name, CAHash string }{c.Endpoint, c.APIGroupSuffix, c.AuthenticatorType, c.AuthenticatorName, hashOf(c.CABundle)}
	}
	return credcache.Key(w)
}

// Session is the cache key of the OIDC session (ID, access and refresh
// tokens) for an issuer, client and scopes.
func Session(issuer, clientID string, scopes []string, caBundle []byte) string {
	k, _ := credcache.Key(struct {
		Kind, Issuer, ClientID string
		Scopes                 []string
		CA                     string
	}{"session", issuer, clientID, canonical(scopes), hashOf(caBundle)})
	return "sess-" + k
}

func canonical(scopes []string) []string {
	s := slices.Clone(scopes)
	slices.Sort(s)
	return slices.Compact(s)
}

func hashOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
