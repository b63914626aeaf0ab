package credcache

import (
	"encoding/json"
	"reflect"
	"testing"
)

func FuzzDecodeEntryMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"credential":{"token":"t","expirationTimestamp":"2030-01-01T00:00:00Z"},"created":"2026-11-22T10:00:00.123456789+01:00","label":"ctx"}`,
		`{"version":1,"credential":{"clientCertificateData":"-----BEGIN CERTIFICATE-----\nMII\n","clientKeyData":"k","expirationTimestamp":"2030-01-01T00:00:00Z"}}`,
		`{"version":1.0}`, `{"version":null,"credential":null,"created":null}`, `{"credential":{"expirationTimestamp":"not a time"}}`,
		`{"credential":{"expirationTimestamp":1}}`, `{"credential":{"expirationTimestamp":{"a":1}}}`, `{"VERSION":2,"Credential":{"TOKEN":"x"}}`,
		`{"credential":{"token":"a"},"credential":{"clientKeyData":"b"}}`, `{"version":99999999999999999999}`, `[]`, `null`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want entry
		wantErr := json.Unmarshal(raw, &want)
		got, err := decodeEntry(raw)
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("%q: encoding/json error %v, minijson error %v", raw, wantErr, err)
		}
		if err == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%q:\nencoding/json %+v\nminijson      %+v", raw, want, got)
		}
	})
}
