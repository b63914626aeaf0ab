package credkey

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// The reference: a key is the hash of what encoding/json makes of these.
type sessionWire struct {
	Issuer       string   `json:"issuer"`
	ClientID     string   `json:"clientID"`
	Scopes       []string `json:"scopes"`
	CABundleHash string   `json:"caBundle,omitempty"`
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
	}{version, kind, inputs})
	sum := sha256.Sum256(wrapped)
	return prefix + hex.EncodeToString(sum[:])
}

func wireOf(in Inputs) (sessionWire, credentialWire) {
	s := sessionWire{Issuer: in.Issuer, ClientID: in.ClientID, Scopes: canonical(in.Scopes), CABundleHash: hashOf(in.CABundle),
		UpstreamName: in.Upstream.Name, UpstreamType: in.Upstream.Type, UpstreamFlow: in.Upstream.Flow, PasswordUser: in.PasswordUser}
	c := credentialWire{sessionWire: s, RequestAudience: in.RequestAudience, ClusterServer: in.ClusterServer, ClusterCAHash: hashOf(in.ClusterCA)}
	if in.StaticToken != "" {
		c.StaticToken = hashOf([]byte(in.StaticToken))
	}
	if k := in.Concierge; k != nil {
		c.Concierge = &conciergeWire{k.Endpoint, k.APIGroupSuffix, k.AuthenticatorType, k.AuthenticatorName, hashOf(k.CABundle)}
	}
	return s, c
}

func FuzzKeysMatchEncodingJSON(f *testing.F) {
	f.Add("https://dex.example.com", "pinniped-cli", "openid groups openid", 0, "aud<>&", []byte("ca"), "LDAP Dir", "ldap", "cli_password", "alice\u2028", true, "https://10.0.0.1:6443", "", "jwt", "dex", []byte("c"), "srv\u2028", []byte("cca"), "tok\xff")
	f.Add("", "", "", 1, "", []byte(nil), "", "", "", "", false, "", "", "", "", []byte(nil), "", []byte(nil), "")
	f.Add("", "", "", 2, "", []byte(nil), "", "", "", "", false, "", "", "", "", []byte(nil), "", []byte(nil), "")
	f.Fuzz(func(t *testing.T, issuer, clientID, scopes string, scopesShape int, aud string, ca []byte, upName, upType, upFlow, user string, concierge bool,
		endpoint, suffix, typ, name string, conciergeCA []byte, server string, clusterCA []byte, static string) {
		in := Inputs{Issuer: issuer, ClientID: clientID, RequestAudience: aud, CABundle: ca, Upstream: Upstream{upName, upType, upFlow}, PasswordUser: user,
			ClusterServer: server, ClusterCA: clusterCA, StaticToken: static}
		switch scopesShape % 3 {
		case 0:
			for i, s := 0, 0; i <= len(scopes); i++ {
				if i == len(scopes) || scopes[i] == ' ' {
					in.Scopes = append(in.Scopes, scopes[s:i])
					s = i + 1
				}
			}
		case 1:
			in.Scopes = []string{}
		}
		if concierge {
			in.Concierge = &Concierge{Endpoint: endpoint, APIGroupSuffix: suffix, AuthenticatorType: typ, AuthenticatorName: name, CABundle: conciergeCA}
		}
		s, c := wireOf(in)
		if got, want := Credential(in), reflectKey("cred-", "credential", c); got != want {
			t.Fatalf("%+v: credential key %s, encoding/json's %s", in, got, want)
		}
		if got, want := Session(in), reflectKey("sess-", "session", s); got != want {
			t.Fatalf("%+v: session key %s, encoding/json's %s", in, got, want)
		}
	})
}
