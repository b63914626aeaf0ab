package jwt

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

func jwk(t *testing.T, key any, kid string) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(jose.JSONWebKey{Key: key, KeyID: kid, Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestFIPSRefusedKeys: under fips140=only the RSA keys under 2048 bits are
// named with their size, and nothing else; outside it, nothing.
func TestFIPSRefusedKeys(t *testing.T) {
	var small, big *rsa.PrivateKey
	var err error
	fips140.WithoutEnforcement(func() {
		if small, err = rsa.GenerateKey(rand.Reader, 1024); err == nil {
			big, err = rsa.GenerateKey(rand.Reader, 2048)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys := []json.RawMessage{jwk(t, small.Public(), "small"), jwk(t, big.Public(), "big"), jwk(t, ec.Public(), "ec"), json.RawMessage(`{"kty":"RSA","kid":"broken","n":"!"}`)}
	got := fipsRefusedKeys(keys, true)
	if len(got) != 1 || got["small"] != 1024 {
		t.Errorf("enforced: %v, want only small (1024)", got)
	}
	if got := fipsRefusedKeys(keys, false); got != nil {
		t.Errorf("not enforced: %v, want none", got)
	}
}

// TestFIPSRefusal: a token naming a refused key gets the reason; any other,
// or a malformed one, none.
func TestFIPSRefusal(t *testing.T) {
	token := func(header string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(header)) + ".e30.sig"
	}
	refused := map[string]int{"small": 1024}
	if why := fipsRefusal(token(`{"alg":"RS256","kid":"small"}`), refused); !strings.Contains(why, `"small", RSA of 1024 bits`) || !strings.Contains(why, "fips140=only") {
		t.Errorf("refused key: %q", why)
	}
	for name, tok := range map[string]string{
		"another key":     token(`{"alg":"RS256","kid":"big"}`),
		"no kid":          token(`{"alg":"RS256"}`),
		"not a JWT":       "garbage",
		"header not b64":  "!!!.e30.sig",
		"header not JSON": token(`nope`),
	} {
		if why := fipsRefusal(tok, refused); why != "" {
			t.Errorf("%s: %q", name, why)
		}
	}
	if why := fipsRefusal(token(`{"kid":"small"}`), nil); why != "" {
		t.Errorf("nothing refused: %q", why)
	}
}
