package execcred

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// The reference: what the decoder must match, by encoding/json.
func decodeRequestReflect(env string) (rawRequest, error) {
	var raw struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Interactive *bool    `json:"interactive"`
			Cluster     *Cluster `json:"cluster"`
		} `json:"spec"`
	}
	err := json.Unmarshal([]byte(env), &raw)
	return rawRequest{APIVersion: raw.APIVersion, Kind: raw.Kind, Interactive: raw.Spec.Interactive, Cluster: raw.Spec.Cluster}, err
}

func FuzzDecodeRequestMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":true}}`,
		`{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false,"cluster":{"server":"https://x","certificate-authority-data":"Y2E=","config":{"a":[1,2]},"insecure-skip-tls-verify":true}}}`,
		`{"APIVERSION":"v","Kind":null,"spec":{"cluster":{"server":"a"},"cluster":{"certificate-authority-data":"!!"}}}`,
		`{"spec":{"interactive":true},"spec":{"interactive":null,"cluster":null}}`,
		`{"spec":{"cluster":{"server":"a"}},"spec":{"cluster":{"certificate-authority-data":null}}}`,
		`{"spec":{"cluster":{"server":"a"},"cluster":null}}`,
		`{"spec":{"cluster":{"certificate-authority-data":[1,2,255,null]}}}`, `{"spec":{"cluster":{"certificate-authority-data":[]}}}`,
		`{"spec":{"cluster":{"certificate-authority-data":[256]}}}`, `{"spec":{"cluster":{"certificate-authority-data":[-0,1.0,1e1,"a"]}}}`,
		`null`, `[]`, `{"kind":1}`, `{"spec":"x"}`, `{"spec":{"interactive":"yes"}}`, `{"a":1}x`, `{"\u212aind":"k"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, env string) {
		want, wantErr := decodeRequestReflect(env)
		got, err := decodeRequest(env)
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("%q: encoding/json error %v, minijson error %v", env, wantErr, err)
		}
		if err != nil {
			return
		}
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		if !bytes.Equal(w, g) {
			t.Fatalf("%q:\nencoding/json %s\nminijson      %s", env, w, g)
		}
	})
}

// The reference writer.
func appendCredentialReflect(apiVersion string, s Status) ([]byte, error) {
	return json.Marshal(struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Interactive bool `json:"interactive"`
		} `json:"spec"`
		Status Status `json:"status"`
	}{Kind: "ExecCredential", APIVersion: apiVersion, Status: s})
}

func FuzzAppendCredentialMatchesEncodingJSON(f *testing.F) {
	f.Add(V1, true, int64(1795000000), "", "-----BEGIN CERTIFICATE-----\nMII<>&\n-----END CERTIFICATE-----\n", "key\"\\")
	f.Add(V1beta1, false, int64(0), "tok\u2028\xff", "", "")
	f.Add("", true, int64(-62135596800-1), "", "", "")
	f.Fuzz(func(t *testing.T, apiVersion string, hasExp bool, unix int64, token, cert, key string) {
		s := Status{Token: token, ClientCertificateData: cert, ClientKeyData: key}
		if hasExp {
			exp := time.Unix(unix, 0).UTC()
			s.ExpirationTimestamp = &exp
		}
		want, wantErr := appendCredentialReflect(apiVersion, s)
		got, err := appendCredential(nil, apiVersion, s)
		if (wantErr == nil) != (err == nil) || !bytes.Equal(want, got) {
			t.Fatalf("encoding/json %s (%v)\nminijson      %s (%v)", want, wantErr, got, err)
		}
	})
}
