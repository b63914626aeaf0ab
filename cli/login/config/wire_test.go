package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// The reference: a key is the hash of what encoding/json makes of these.
type sessionWire struct {
	Issuer       string   `json:"issuer"`
	ClientID     string   `json:"clientID"`
	Scopes       []string `json:"scopes"`
	CABundleHash string   `json:"caBundle,omitempty"`
	SecretHash   string   `json:"clientSecret,omitempty"`
	Params       []string `json:"authorizeParams,omitempty"`
	UpstreamName string   `json:"upstreamName,omitempty"`
	UpstreamType string   `json:"upstreamType,omitempty"`
	UpstreamFlow string   `json:"upstreamFlow,omitempty"`
	PasswordUser string   `json:"passwordUser,omitempty"`
}

type conciergeWire struct {
	Endpoint string `json:"endpoint"`
	Suffix   string `json:"suffix"`
	Type     string `json:"type"`
	Name     string `json:"name"`
	CAHash   string `json:"caHash"`
}

type credentialWire struct {
	sessionWire
	RequestAudience string         `json:"requestAudience,omitempty"`
	Present         string         `json:"present,omitempty"`
	Concierge       *conciergeWire `json:"concierge,omitempty"`
	ClusterServer   string         `json:"clusterServer,omitempty"`
	ClusterCAHash   string         `json:"clusterCA,omitempty"`
	StaticToken     string         `json:"staticTokenHash,omitempty"`
}

func reflectKey(prefix, kind string, v any) string {
	inputs, _ := json.Marshal(v)
	wrapped, _ := json.Marshal(struct {
		V      string          `json:"v"`
		Kind   string          `json:"kind"`
		Inputs json.RawMessage `json:"inputs"`
	}{keyVersion, kind, inputs})
	sum := sha256.Sum256(wrapped)
	return prefix + hex.EncodeToString(sum[:])
}

func wireOf(c *OIDC, cl Cluster) (sessionWire, credentialWire) {
	s := sessionWire{Issuer: c.Issuer, ClientID: c.ClientID, Scopes: canonical(c.Scopes), CABundleHash: hashOf(c.CABundle),
		UpstreamName: c.Upstream.Name, UpstreamFlow: c.Upstream.Flow}
	if c.ClientSecret != "" {
		s.SecretHash = hashOf([]byte(c.ClientSecret))
	}
	if p := canonical(c.AuthorizeParams); len(p) > 0 {
		s.Params = p
	}
	if c.Upstream.Name != "" {
		s.UpstreamType = c.Upstream.Type
	}
	if c.MayUsePassword() {
		s.PasswordUser = c.Username
	}
	w := credentialWire{sessionWire: s, RequestAudience: c.RequestAudience, ClusterServer: cl.Server, ClusterCAHash: hashOf(cl.CA)}
	if c.PresentsAccessToken() {
		w.Present = PresentAccess
	}
	if k := c.Concierge; k != nil {
		w.Concierge = &conciergeWire{k.Endpoint, k.Suffix(), k.AuthenticatorType, k.AuthenticatorName, hashOf(k.CABundle)}
	}
	return s, w
}

func FuzzKeysMatchEncodingJSON(f *testing.F) {
	f.Add("https://dex.example.com", "pinniped-cli", "openid groups openid", 0, "aud<>&", []byte("ca"), "LDAP Dir", "ldap", "cli_password", "alice\u2028", "", true, "https://10.0.0.1:6443", "", "jwt", "dex", []byte("c"), "srv\u2028", []byte("cca"), "tok\xff")
	f.Add("", "", "", 1, "", []byte(nil), "", "", "", "", "password", false, "", "", "", "", []byte(nil), "", []byte(nil), "")
	f.Add("", "", "", 2, "", []byte(nil), "", "", "", "", "", false, "", "", "", "", []byte(nil), "", []byte(nil), "")
	f.Fuzz(func(t *testing.T, issuer, clientID, scopes string, scopesShape int, aud string, ca []byte, upName, upType, upFlow, user, flow string, concierge bool,
		endpoint, suffix, typ, name string, conciergeCA []byte, server string, clusterCA []byte, static string) {
		c := &OIDC{Issuer: issuer, ClientID: clientID, RequestAudience: aud, CABundle: ca, Upstream: Upstream{upName, upType, upFlow},
			Username: user, Flow: Flow(flow)}
		switch scopesShape % 3 {
		case 0:
			for i, s := 0, 0; i <= len(scopes); i++ {
				if i == len(scopes) || scopes[i] == ' ' {
					c.Scopes = append(c.Scopes, scopes[s:i])
					s = i + 1
				}
			}
		case 1:
			c.Scopes = []string{}
		case 2:
			// The newer members, from inputs the corpus already has.
			c.ClientSecret, c.AuthorizeParams = static, strings.Fields(scopes)
			if !concierge {
				c.PresentToken = PresentAccess
			}
		}
		if concierge {
			c.Concierge = &Concierge{Endpoint: endpoint, APIGroupSuffix: suffix, AuthenticatorType: typ, AuthenticatorName: name, CABundle: conciergeCA}
		}
		cl := Cluster{Server: server, CA: clusterCA}
		s, w := wireOf(c, cl)
		if got, want := c.CredentialKey(cl), reflectKey("cred-", "credential", w); got != want {
			t.Fatalf("%+v: credential key %s, encoding/json's %s", c, got, want)
		}
		if got, want := c.SessionKey(), reflectKey("sess-", "session", s); got != want {
			t.Fatalf("%+v: session key %s, encoding/json's %s", c, got, want)
		}
		st := &Static{Token: static, Concierge: c.Concierge}
		sw := credentialWire{sessionWire: sessionWire{}, Concierge: w.Concierge, ClusterServer: cl.Server, ClusterCAHash: hashOf(cl.CA), StaticToken: hashOf([]byte(static))}
		if got, want := st.CredentialKey(cl), reflectKey("cred-", "credential", sw); got != want {
			t.Fatalf("static %+v: key %s, encoding/json's %s", st, got, want)
		}
	})
}
