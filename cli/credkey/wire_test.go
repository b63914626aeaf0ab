package credkey

import (
	"testing"

	"github.com/pinniped-kit/pinniped/cache/credcache"
)

// wire is the reference: the key is what encoding/json makes of it.
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

func credentialReflect(in Inputs) (string, error) {
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

func FuzzCredentialMatchesEncodingJSON(f *testing.F) {
	f.Add("https://dex.example.com", "pinniped-cli", "openid groups openid", 0, "aud<>&", []byte("ca"), true, "https://10.0.0.1:6443", "", "jwt", "dex", []byte("c"), "srv\u2028", []byte("cca"), "tok\xff")
	f.Add("", "", "", 1, "", []byte(nil), false, "", "", "", "", []byte(nil), "", []byte(nil), "")
	f.Add("", "", "", 2, "", []byte(nil), false, "", "", "", "", []byte(nil), "", []byte(nil), "")
	f.Fuzz(func(t *testing.T, issuer, clientID, scopes string, scopesShape int, aud string, ca []byte, concierge bool,
		endpoint, suffix, typ, name string, conciergeCA []byte, server string, clusterCA []byte, static string) {
		in := Inputs{Issuer: issuer, ClientID: clientID, RequestAudience: aud, CABundle: ca,
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
		want, _ := credentialReflect(in)
		if got, _ := Credential(in); got != want {
			t.Fatalf("%+v: key %s, encoding/json's %s", in, got, want)
		}
	})
}
