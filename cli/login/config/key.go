package config

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/pinniped-kit/pinniped/cache/minijson"
)

// Cache keys: one for the cluster credential a login prints, one for the
// OIDC session (ID, access and refresh tokens) it was made from. Every
// input that can change the resulting identity is in them, so two logins
// that could end as different users never share either; the order of
// flags and scopes does not matter.

// keyVersion changes whenever what goes into a key changes, so an older
// binary's entries are never read as this one's.
//   - v1: issuer, client, scopes, audience, CAs, concierge, cluster, static token.
//   - v2: also the Supervisor's upstream identity provider (name, type,
//     flow) and the username of a password login; sessions keyed by the
//     same writer. Later members with omitempty (a client secret's hash,
//     authorize parameters, the token presented) leave the keys of logins
//     without them as they were.
const keyVersion = "pinniped-credcache-v2"

// Cluster is the cluster kubectl asks about (KUBERNETES_EXEC_INFO).
type Cluster struct {
	Server string
	CA     []byte
}

// CredentialKey is the cache key of the cluster credential for cluster.
func (c *OIDC) CredentialKey(cluster Cluster) string {
	o := c.sessionInputs()
	o.str("requestAudience", c.RequestAudience)
	if c.PresentsAccessToken() {
		o.str("present", PresentAccess)
	}
	o.concierge(c.Concierge)
	o.cluster(cluster)
	return o.key("cred-", "credential")
}

// SessionKey is the cache key of the OIDC session: the same for every
// cluster reached through this login.
func (c *OIDC) SessionKey() string {
	return c.sessionInputs().key("sess-", "session")
}

// CredentialKey is the cache key of the cluster credential the agent
// trades the token for. Only a hash of the token is in it.
func (c *Static) CredentialKey(cluster Cluster) string {
	o := c.emptySession()
	o.concierge(c.Concierge)
	o.cluster(cluster)
	o.str("staticTokenHash", hashOf([]byte(c.Token)))
	return o.key("cred-", "credential")
}

func (c *Static) emptySession() *object {
	o := &object{b: make([]byte, 0, 512)}
	o.b = append(o.b, `{"issuer":"","clientID":"","scopes":null`...)
	return o
}

// sessionInputs writes what the session and the credential share.
func (c *OIDC) sessionInputs() *object {
	o := &object{b: make([]byte, 0, 512)}
	o.b = append(o.b, `{"issuer":`...)
	o.b = minijson.AppendString(o.b, c.Issuer)
	o.b = append(o.b, `,"clientID":`...)
	o.b = minijson.AppendString(o.b, c.ClientID)
	o.b = append(o.b, `,"scopes":`...)
	if scopes := canonical(c.Scopes); scopes == nil {
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
	o.str("caBundle", hashOf(c.CABundle))
	if c.ClientSecret != "" {
		o.str("clientSecret", hashOf([]byte(c.ClientSecret)))
	}
	if params := canonical(c.AuthorizeParams); len(params) > 0 {
		o.b = append(o.b, `,"authorizeParams":[`...)
		for i, p := range params {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = minijson.AppendString(o.b, p)
		}
		o.b = append(o.b, ']')
	}
	o.str("upstreamName", c.Upstream.Name)
	if c.Upstream.Name != "" {
		// The type (default oidc) means something only beside a name.
		o.str("upstreamType", c.Upstream.Type)
	}
	o.str("upstreamFlow", c.Upstream.Flow)
	if c.MayUsePassword() {
		// Two people in one shell, each with their own variables, must
		// not share a cache entry.
		o.str("passwordUser", c.Username)
	}
	return o
}

// object is a JSON object being written, member by member, in a fixed
// order: a key is the hash of these bytes, so a member's name and place
// must never change without the version (a test holds them to
// encoding/json's encoding of equivalent tagged structs). No reflection:
// the front computes a key on every kubectl call.
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

func (o *object) concierge(c *Concierge) {
	if c == nil {
		return
	}
	o.b = append(o.b, `,"concierge":{"endpoint":`...)
	o.b = minijson.AppendString(o.b, c.Endpoint)
	o.b = append(o.b, `,"suffix":`...)
	o.b = minijson.AppendString(o.b, c.Suffix())
	o.b = append(o.b, `,"type":`...)
	o.b = minijson.AppendString(o.b, c.AuthenticatorType)
	o.b = append(o.b, `,"name":`...)
	o.b = minijson.AppendString(o.b, c.AuthenticatorName)
	o.b = append(o.b, `,"caHash":`...)
	o.b = minijson.AppendString(o.b, hashOf(c.CABundle))
	o.b = append(o.b, '}')
}

func (o *object) cluster(c Cluster) {
	o.str("clusterServer", c.Server)
	o.str("clusterCA", hashOf(c.CA))
}

// key closes the object and hashes it with the version and the kind.
func (o *object) key(prefix, kind string) string {
	h := sha256.New()
	h.Write([]byte(`{"v":"` + keyVersion + `","kind":"` + kind + `","inputs":`))
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
