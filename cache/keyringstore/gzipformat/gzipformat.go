// Package gzipformat reads keyring values in the format pinniped wrote
// before it stopped compressing them ("pv1": gzip, then unpadded base64),
// so credentials and sessions cached by an earlier version keep working.
// Only pinniped-engine links it (see keyringstore.RegisterLegacyFormat).
package gzipformat

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"

	"github.com/pinniped-kit/pinniped/cache"
)

// Tag is the format's header tag.
const Tag = "pv1"

// maxSize bounds a decompressed value: a credential is a few KB.
const maxSize = 16 << 20

// Decode reads one pv1 value; anything malformed reads as missing.
func Decode(encoded string) ([]byte, error) {
	raw, err := base64.RawStdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, cache.ErrNotFound
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, cache.ErrNotFound
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxSize))
	if err != nil {
		return nil, cache.ErrNotFound
	}
	return out, nil
}
