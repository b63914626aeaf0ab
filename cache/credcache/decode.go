package credcache

import (
	"time"

	"github.com/pinniped-kit/pinniped/cache/minijson"
)

// decodeEntry reads a cache entry as encoding/json would into entry, but
// without reflection: Get runs in the lean front on every kubectl call
// (see package minijson). A differential fuzz test holds it to
// encoding/json.
func decodeEntry(raw []byte) (entry, error) {
	var e entry
	d := minijson.NewDecoder(raw)
	err := d.Object(func(key string) error {
		switch {
		case minijson.KeyIs(key, "version"):
			n, ok, err := d.Int()
			if ok {
				e.Version = n
			}
			return err
		case minijson.KeyIs(key, "credential"):
			return d.Object(func(key string) error {
				c := &e.Credential
				switch {
				case minijson.KeyIs(key, "token"):
					return d.StringInto(&c.Token)
				case minijson.KeyIs(key, "clientCertificateData"):
					return d.StringInto(&c.ClientCertificateData)
				case minijson.KeyIs(key, "clientKeyData"):
					return d.StringInto(&c.ClientKeyData)
				case minijson.KeyIs(key, "expirationTimestamp"):
					return readTime(d, &c.ExpirationTimestamp)
				}
				return d.Skip()
			})
		case minijson.KeyIs(key, "created"):
			return readTime(d, &e.Created)
		case minijson.KeyIs(key, "label"):
			return d.StringInto(&e.Label)
		}
		return d.Skip()
	})
	if err == nil {
		err = d.Finish()
	}
	return e, err
}

// readTime hands the raw value to time.Time's own UnmarshalJSON, as
// encoding/json does (null included, which leaves the time alone).
func readTime(d *minijson.Decoder, dst *time.Time) error {
	raw, err := d.Raw()
	if err != nil {
		return err
	}
	return dst.UnmarshalJSON(raw)
}
