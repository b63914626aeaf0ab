package execcred

import (
	"encoding/base64"

	"github.com/pinniped-kit/pinniped/cache/minijson"
)

// The JSON here is read and written without reflection (see package
// minijson: it runs on every kubectl call). The tests hold both to what
// encoding/json does with the equivalent tagged structs.

// rawRequest is the part of KUBERNETES_EXEC_INFO pinniped reads.
type rawRequest struct {
	APIVersion, Kind string
	Interactive      *bool
	Cluster          *Cluster
}

// decodeRequest reads env as encoding/json would into
//
//	{apiVersion, kind string; spec {interactive *bool; cluster *Cluster}}
//
// with its rules for member names (case-insensitive), null (no change,
// or nil for pointers and byte slices) and repeated members (the last wins,
// objects merge).
func decodeRequest(env string) (rawRequest, error) {
	var raw rawRequest
	d := minijson.NewDecoder([]byte(env))
	err := d.Object(func(key string) error {
		switch {
		case minijson.KeyIs(key, "apiVersion"):
			return d.StringInto(&raw.APIVersion)
		case minijson.KeyIs(key, "kind"):
			return d.StringInto(&raw.Kind)
		case minijson.KeyIs(key, "spec"):
			return d.Object(func(key string) error {
				switch {
				case minijson.KeyIs(key, "interactive"):
					b, ok, err := d.Bool()
					if err == nil {
						raw.Interactive = nil
						if ok {
							raw.Interactive = &b
						}
					}
					return err
				case minijson.KeyIs(key, "cluster"):
					if null, err := d.Null(); null || err != nil {
						raw.Cluster = nil
						return err
					}
					if raw.Cluster == nil {
						raw.Cluster = &Cluster{}
					}
					return decodeCluster(d, raw.Cluster)
				}
				return d.Skip()
			})
		}
		return d.Skip()
	})
	if err == nil {
		err = d.Finish()
	}
	return raw, err
}

func decodeCluster(d *minijson.Decoder, c *Cluster) error {
	return d.Object(func(key string) error {
		switch {
		case minijson.KeyIs(key, "server"):
			return d.StringInto(&c.Server)
		case minijson.KeyIs(key, "certificate-authority-data"):
			if d.Peek() == '[' {
				// encoding/json also takes a []byte as an array of numbers.
				b := []byte{}
				err := d.Array(func() error {
					v, _, err := d.Uint8() // null is 0
					b = append(b, v)
					return err
				})
				c.CertificateAuthorityData = b
				return err
			}
			s, ok, err := d.String()
			if err != nil {
				return err
			}
			if !ok {
				c.CertificateAuthorityData = nil
				return nil
			}
			// As encoding/json decodes a []byte: standard base64, padded.
			b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
			n, err := base64.StdEncoding.Decode(b, []byte(s))
			if err != nil {
				return err
			}
			c.CertificateAuthorityData = b[:n]
			return nil
		}
		return d.Skip()
	})
}

// appendCredential appends the ExecCredential as encoding/json writes
//
//	{kind, apiVersion string; spec {interactive bool}; status Status}
//
// (the timestamp already truncated to seconds in UTC).
func appendCredential(b []byte, apiVersion string, s Status) ([]byte, error) {
	b = append(b, `{"kind":"ExecCredential","apiVersion":`...)
	b = minijson.AppendString(b, apiVersion)
	b = append(b, `,"spec":{"interactive":false},"status":{`...)
	sep := ""
	field := func(name, value string) {
		if value == "" {
			return
		}
		b = append(b, sep...)
		b = append(b, name...)
		b = minijson.AppendString(b, value)
		sep = ","
	}
	if s.ExpirationTimestamp != nil {
		t, err := s.ExpirationTimestamp.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b = append(b, `"expirationTimestamp":`...)
		b = append(b, t...)
		sep = ","
	}
	field(`"token":`, s.Token)
	field(`"clientCertificateData":`, s.ClientCertificateData)
	field(`"clientKeyData":`, s.ClientKeyData)
	return append(b, "}}"...), nil
}
