// Package credkey derives the cache keys of `pinniped login`: one for the
// cluster credential and one for the OIDC session it was made from. Keys
// are canonical (flag order, scope order and duplicates do not matter) and
// versioned. The lean front binary and the engine both use it, so a
// credential the engine cached is exactly the one the front finds.
//
// Every input that can change the resulting identity is part of a key, so
// two kubeconfigs that differ in one of them never share a credential or a
// session.
package credkey

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/pinniped-kit/pinniped/cache/minijson"
)

// version changes whenever what goes into a key changes, so an older
// binary's entries are never read as this one's.
//   - v1: issuer, client, scopes, audience, CAs, concierge, cluster, static token.
//   - v2: also the Supervisor's upstream identity provider (name, type,
//     flow) and the username of a password login; sessions keyed by the
//     same writer.
const version = "pinniped-credcache-v2"

// Inputs are everything that determines a cluster credential. Two runs with
// the same inputs may share it, however their flags were ordered.
type Inputs struct {
	Issuer          string
	ClientID        string
	Scopes          []string
	RequestAudience string
	CABundle        []byte // the issuer's
	// Upstream is the identity provider behind a Pinniped Supervisor: one
	// Supervisor can log the same person in as different users through
	// different providers.
	Upstream Upstream
	// PasswordUser is whom a password login logs in as (PINNIPED_USERNAME),
	// empty for logins that ask the person in a browser.
	PasswordUser string
	// Concierge is nil when the ID token itself is the credential.
	Concierge *Concierge
	// ClusterServer and ClusterCA come from KUBERNETES_EXEC_INFO.
	ClusterServer string
	ClusterCA     []byte
	StaticToken   string
}

// Upstream names an identity provider of a Pinniped Supervisor.
type Upstream struct {
	Name, Type, Flow string
}

// Concierge is where a token is exchanged.
type Concierge struct {
	Endpoint, APIGroupSuffix, AuthenticatorType, AuthenticatorName string
	CABundle                                                       []byte
}

// Credential is the cache key of the cluster credential for in.
func Credential(in Inputs) string {
	o := session(in)
	o.str("requestAudience", in.RequestAudience)
	if c := in.Concierge; c != nil {
		o.b = append(o.b, `,"concierge":{"endpoint":`...)
		o.b = minijson.AppendString(o.b, c.Endpoint)
		o.b = append(o.b, `,"suffix":`...)
		o.b = minijson.AppendString(o.b, c.APIGroupSuffix)
		o.b = append(o.b, `,"type":`...)
		o.b = minijson.AppendString(o.b, c.AuthenticatorType)
		o.b = append(o.b, `,"name":`...)
		o.b = minijson.AppendString(o.b, c.AuthenticatorName)
		o.b = append(o.b, `,"caHash":`...)
		o.b = minijson.AppendString(o.b, hashOf(c.CABundle))
		o.b = append(o.b, '}')
	}
	o.str("clusterServer", in.ClusterServer)
	o.str("clusterCA", hashOf(in.ClusterCA))
	if in.StaticToken != "" {
		o.str("staticTokenHash", hashOf([]byte(in.StaticToken)))
	}
	return o.key("cred-", "credential")
}

// Session is the cache key of the OIDC session (ID, access and refresh
// tokens) that in logs in with: the same for every cluster reached through
// that login.
func Session(in Inputs) string {
	return session(in).key("sess-", "session")
}

// session writes the inputs the session and the credential share.
func session(in Inputs) *object {
	o := &object{b: make([]byte, 0, 512)}
	o.b = append(o.b, `{"issuer":`...)
	o.b = minijson.AppendString(o.b, in.Issuer)
	o.b = append(o.b, `,"clientID":`...)
	o.b = minijson.AppendString(o.b, in.ClientID)
	o.b = append(o.b, `,"scopes":`...)
	if scopes := canonical(in.Scopes); scopes == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, '[')
		for i, s := range scopes {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = minijson.AppendString(o.b, s)
		}
		o.b = append(o.b, ']')
	}
	o.str("caBundle", hashOf(in.CABundle))
	o.str("upstreamName", in.Upstream.Name)
	o.str("upstreamType", in.Upstream.Type)
	o.str("upstreamFlow", in.Upstream.Flow)
	o.str("passwordUser", in.PasswordUser)
	return o
}

// object is a JSON object being written, member by member, in a fixed
// order: the key is the hash of these bytes, so a member's name and place
// must never change (a test holds them to encoding/json's encoding of an
// equivalent tagged struct). No reflection: the front computes a key on
// every kubectl call.
type object struct{ b []byte }

// str appends ,"name":value unless value is empty (omitempty).
func (o *object) str(name, value string) {
	if value == "" {
		return
	}
	o.b = append(o.b, `,"`...)
	o.b = append(o.b, name...)
	o.b = append(o.b, `":`...)
	o.b = minijson.AppendString(o.b, value)
}

// key closes the object and hashes it with the version and the kind.
func (o *object) key(prefix, kind string) string {
	h := sha256.New()
	h.Write([]byte(`{"v":"` + version + `","kind":"` + kind + `","inputs":`))
	h.Write(append(o.b, '}'))
	h.Write([]byte("}"))
	return prefix + hex.EncodeToString(h.Sum(nil))
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
