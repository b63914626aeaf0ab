package jwt

import (
	"crypto/fips140"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// fipsMinRSABits is the smallest RSA modulus Go's FIPS 140-only mode
// verifies with.
const fipsMinRSABits = 2048

// fipsRefusedKeys finds the keys of a JSON Web Key Set that FIPS 140-only
// mode (GODEBUG=fips140=only) refuses to verify with, as crypto/rsa does:
// RSA keys under 2048 bits, of an odd size, or with an exponent of 65536 or
// less. It returns why, by key id, and how many keys are refused (keys may
// share a kid or have none). Nothing unless enforced. go-oidc reports a
// signature such a key made only as "failed to verify": this lets the
// agent say why.
func fipsRefusedKeys(keys []json.RawMessage, enforced bool) (map[string]string, int) {
	if !enforced {
		return nil, 0
	}
	var refused map[string]string
	n := 0
	for _, raw := range keys {
		why := fipsRefusedRSA(raw)
		if why == "" {
			continue
		}
		if refused == nil {
			refused = map[string]string{}
		}
		var k struct {
			Kid string `json:"kid"`
		}
		_ = json.Unmarshal(raw, &k)
		refused[k.Kid] = why
		n++
	}
	return refused, n
}

// fipsRefusedRSA says why FIPS 140-only mode refuses the RSA key raw; ""
// for any other key, or one it takes.
func fipsRefusedRSA(raw json.RawMessage) string {
	var k struct {
		Kty string `json:"kty"`
		N   string `json:"n"`
		E   string `json:"e"`
	}
	if json.Unmarshal(raw, &k) != nil || k.Kty != "RSA" {
		return ""
	}
	nb, err := base64.RawURLEncoding.DecodeString(k.N)
	if err != nil {
		return ""
	}
	eb, err := base64.RawURLEncoding.DecodeString(k.E)
	if err != nil {
		return ""
	}
	bits := new(big.Int).SetBytes(nb).BitLen()
	switch e := new(big.Int).SetBytes(eb); {
	case bits < fipsMinRSABits:
		return fmt.Sprintf("RSA of %d bits (%d at least)", bits, fipsMinRSABits)
	case bits%2 == 1:
		return fmt.Sprintf("RSA of an odd size, %d bits", bits)
	case e.Cmp(big.NewInt(1<<16)) <= 0:
		return fmt.Sprintf("RSA with the exponent %s (more than 65536 needed)", e)
	}
	return ""
}

// fipsEnforced is crypto/fips140.Enforced, a variable for tests.
var fipsEnforced = fips140.Enforced

// fipsRefusal explains a token whose signature did not verify when it is
// an RSA signature naming a key FIPS 140-only mode refuses; "" otherwise.
// It says what the token claims, not what was checked: a forger can name
// any key.
func fipsRefusal(token string, refused map[string]string) string {
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
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if json.Unmarshal(raw, &h) != nil || (!strings.HasPrefix(h.Alg, "RS") && !strings.HasPrefix(h.Alg, "PS")) {
		return ""
	}
	why, ok := refused[h.Kid]
	if !ok {
		return ""
	}
	return fmt.Sprintf("the token names the issuer's key %q, %s, which this agent cannot verify with: it runs FIPS 140-only (GODEBUG=fips140=only)", h.Kid, why)
}
