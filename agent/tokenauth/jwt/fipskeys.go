package jwt

import (
	"crypto/fips140"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// fipsMinRSABits is the smallest RSA key Go's FIPS 140-only mode verifies
// with.
const fipsMinRSABits = 2048

// fipsRefusedKeys names, by key id, the keys of a JSON Web Key Set that FIPS
// 140-only mode (GODEBUG=fips140=only) refuses to verify with: RSA keys
// under 2048 bits, with their size. Nil unless enforced. go-oidc reports a
// signature such a key made only as "failed to verify": this lets the
// agent say why.
func fipsRefusedKeys(keys []json.RawMessage, enforced bool) map[string]int {
	if !enforced {
		return nil
	}
	var refused map[string]int
	for _, raw := range keys {
		var k struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			N   string `json:"n"`
		}
		if json.Unmarshal(raw, &k) != nil || k.Kty != "RSA" {
			continue
		}
		n, err := base64.RawURLEncoding.DecodeString(k.N)
		if err != nil {
			continue
		}
		if bits := new(big.Int).SetBytes(n).BitLen(); bits < fipsMinRSABits {
			if refused == nil {
				refused = map[string]int{}
			}
			refused[k.Kid] = bits
		}
	}
	return refused
}

// fipsEnforced is crypto/fips140.Enforced, a variable for tests.
var fipsEnforced = fips140.Enforced

// fipsRefusal explains a token whose signature did not verify when the key
// it names is one FIPS 140-only mode refuses; "" otherwise.
func fipsRefusal(token string, refused map[string]int) string {
	if len(refused) == 0 {
		return ""
	}
	header, _, ok := strings.Cut(token, ".")
	if !ok {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return ""
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return ""
	}
	bits, ok := refused[h.Kid]
	if !ok {
		return ""
	}
	return fmt.Sprintf("the issuer signed it with key %q, RSA of %d bits, which this agent refuses: it runs FIPS 140-only (GODEBUG=fips140=only), which verifies with RSA keys of %d bits or more", h.Kid, bits, fipsMinRSABits)
}
