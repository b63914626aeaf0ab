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
	"github.com/pinniped-kit/pinniped/cache/minijson"
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

// Credential is the cache key of the cluster credential for in: the hash of
// the JSON below. Its member names and order must not change (cached
// credentials would be orphaned); it is written without reflection because
// the lean front computes it on every kubectl call, and a test holds it to
// encoding/json's encoding of the equivalent tagged struct.
func Credential(in Inputs) (string, error) {
	b := make([]byte, 0, 512)
	b = append(b, `{"issuer":`...)
	b = minijson.AppendString(b, in.Issuer)
	b = append(b, `,"clientID":`...)
	b = minijson.AppendString(b, in.ClientID)
	b = append(b, `,"scopes":`...)
	if scopes := canonical(in.Scopes); scopes == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range scopes {
			if i > 0 {
				b = append(b, ',')
			}
			b = minijson.AppendString(b, s)
		}
		b = append(b, ']')
	}
	b = optional(b, "requestAudience", in.RequestAudience)
	b = optional(b, "caBundle", hashOf(in.CABundle))
	if c := in.Concierge; c != nil {
		b = append(b, `,"concierge":{"Endpoint":`...)
		b = minijson.AppendString(b, c.Endpoint)
		b = append(b, `,"Suffix":`...)
		b = minijson.AppendString(b, c.APIGroupSuffix)
		b = append(b, `,"Type":`...)
		b = minijson.AppendString(b, c.AuthenticatorType)
		b = append(b, `,"Name":`...)
		b = minijson.AppendString(b, c.AuthenticatorName)
		b = append(b, `,"CAHash":`...)
		b = minijson.AppendString(b, hashOf(c.CABundle))
		b = append(b, '}')
	}
	b = optional(b, "clusterServer", in.ClusterServer)
	b = optional(b, "clusterCA", hashOf(in.ClusterCA))
	if in.StaticToken != "" {
		b = optional(b, "staticTokenHash", hashOf([]byte(in.StaticToken)))
	}
	return credcache.KeyOfJSON(append(b, '}')), nil
}

// optional appends ,"name":value unless value is empty (omitempty).
func optional(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return minijson.AppendString(b, value)
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
