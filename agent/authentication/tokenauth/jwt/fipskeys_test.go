package jwt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
)

func jwk(t *testing.T, key any, kid string) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(jose.JSONWebKey{Key: key, KeyID: kid, Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestFIPSRefusedKeys: under fips140=only the RSA keys crypto/rsa refuses
// are named with the reason, and counted one by one (a kid may repeat or
// be missing); outside it, nothing.
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
	smallExp := big.PublicKey
	smallExp.E = 3
	keys := []json.RawMessage{
		jwk(t, small.Public(), "small"), jwk(t, small.Public(), ""), jwk(t, small.Public(), ""),
		jwk(t, &smallExp, "e3"), jwk(t, big.Public(), "big"), jwk(t, ec.Public(), "ec"),
		json.RawMessage(`{"kty":"RSA","kid":"broken","n":"!","e":"AQAB"}`),
	}
	got, n := fipsRefusedKeys(keys, true)
	if n != 4 || len(got) != 3 || !strings.Contains(got["small"], "1024 bits") || !strings.Contains(got[""], "1024 bits") || !strings.Contains(got["e3"], "exponent 3") {
		t.Errorf("enforced: %d refused, %v; want 4: small, two without a kid (1024 bits), e3 (exponent 3)", n, got)
	}
	if got, n := fipsRefusedKeys(keys, false); got != nil || n != 0 {
		t.Errorf("not enforced: %v %d, want none", got, n)
	}
}

// TestFIPSOnlyKeySet: an issuer whose every key FIPS 140-only mode refuses
// fails the authenticator at the key set, saying so; with one key it takes,
// the authenticator is built.
func TestFIPSOnlyKeySet(t *testing.T) {
	fipsEnforced = func() bool { return true }
	t.Cleanup(func() { fipsEnforced = fips140.Enforced })
	iss := jwttest.New(t)
	kid, _ := iss.AddRS256(t, 1024)
	cfg := Config{Spec: authv1alpha1.JWTAuthenticatorSpec{Issuer: iss.URL, Audience: "a"}, CABundle: iss.CABundle}
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatalf("with an ES256 key beside the small RSA one: %v", err)
	}
	iss.PublishOnly(kid)
	_, err := New(context.Background(), cfg)
	var step *StepError
	if !errors.As(err, &step) || step.Condition != CondJWKSFetchValid || !strings.Contains(err.Error(), "FIPS 140-only") {
		t.Fatalf("only a small RSA key: %v, want a %s failure that names FIPS 140-only", err, CondJWKSFetchValid)
	}
}

// TestFIPSRefusal: an RSA token naming a refused key gets the reason; any
// other, or a malformed one, none.
func TestFIPSRefusal(t *testing.T) {
	token := func(header string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(header)) + ".e30.sig"
	}
	refused := map[string]string{"small": "RSA of 1024 bits (2048 at least)"}
	if why := fipsRefusal(token(`{"alg":"RS256","kid":"small"}`), refused); !strings.Contains(why, `key "small", RSA of 1024 bits`) || !strings.Contains(why, "fips140=only") {
		t.Errorf("refused key: %q", why)
	}
	for name, tok := range map[string]string{
		"another key":     token(`{"alg":"RS256","kid":"big"}`),
		"not RSA":         token(`{"alg":"HS256","kid":"small"}`),
		"no kid":          token(`{"alg":"RS256"}`),
		"not a JWT":       "garbage",
		"header not b64":  "!!!.e30.sig",
		"header not JSON": token(`nope`),
	} {
		if why := fipsRefusal(tok, refused); why != "" {
			t.Errorf("%s: %q", name, why)
		}
	}
	if why := fipsRefusal(token(`{"alg":"RS256","kid":"small"}`), nil); why != "" {
		t.Errorf("nothing refused: %q", why)
	}
}
