package jwt_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	kubeoidc "k8s.io/apiserver/plugin/pkg/authenticator/token/oidc"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/claimrules"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt"
	"github.com/pinniped-kit/pinniped/agent/authentication/tokenauth/jwt/jwttest"
)

// ecKeySet verifies ES256 signatures with one key; it is both go-oidc v3's
// KeySet (ours) and v2's (kube-apiserver's), which have the same method.
type ecKeySet struct{ pub *ecdsa.PublicKey }

func (k ecKeySet) VerifySignature(_ context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, err
	}
	return jws.Verify(k.pub)
}

// TestTimesSameAsKubeAPIServer runs tokens at the edges of exp, nbf and
// iat through kube-apiserver's own OIDC authenticator and ours with
// spec.allowedClockSkew unset: each must accept and refuse the same
// tokens, so a token kube-apiserver (and upstream's Concierge) would
// refuse for its times is never traded for a certificate here. Both read
// the real clock (kube's cannot be set from outside its package), so the
// edges keep margins of 30 s.
func TestTimesSameAsKubeAPIServer(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys := ecKeySet{&key.PublicKey}
	const issuer = "https://issuer.example.com"
	spec := authv1alpha1.JWTAuthenticatorSpec{Issuer: issuer, Audience: "cluster-a"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube, err := kubeoidc.New(ctx, kubeoidc.Options{
		JWTAuthenticator:     claimrules.Model(spec),
		KeySet:               keys,
		SupportedSigningAlgs: []string{"ES256"},
	})
	if err != nil {
		t.Fatalf("kube-apiserver's authenticator refuses the configuration: %v", err)
	}
	ours, err := jwt.NewWithKeySet(jwt.Config{Spec: spec}, keys)
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	for _, c := range []struct {
		name   string
		times  map[string]any // nil deletes the claim
		accept bool
	}{
		{"valid", nil, true},
		{"expired by 1 s", map[string]any{"iat": at(-10 * time.Minute), "exp": at(-time.Second)}, false},
		{"expired by 1 s, no iat", map[string]any{"iat": nil, "exp": at(-time.Second)}, false},
		{"2-minute token expired by 1 s", map[string]any{"iat": at(-2*time.Minute - time.Second), "exp": at(-time.Second)}, false},
		{"expired by 2 min", map[string]any{"iat": at(-time.Hour), "exp": at(-2 * time.Minute)}, false},
		{"no exp", map[string]any{"exp": nil}, false},
		{"nbf 30 s ahead", map[string]any{"nbf": at(30 * time.Second)}, true},
		{"nbf 90 s ahead", map[string]any{"nbf": at(90 * time.Second)}, false},
		{"nbf past", map[string]any{"nbf": at(-time.Minute)}, true},
		{"no iat", map[string]any{"iat": nil}, true},
		{"iat 30 s ahead", map[string]any{"iat": at(30 * time.Second)}, true},
		{"exp in a string", map[string]any{"exp": strconv.FormatInt(at(time.Hour), 10)}, true},
		{"expired, exp in a string", map[string]any{"exp": strconv.FormatInt(at(-time.Second), 10)}, false},
		{"iat in a string", map[string]any{"iat": strconv.FormatInt(at(0), 10)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			claims := map[string]any{"iss": issuer, "aud": "cluster-a", "username": "alice", "iat": at(0), "exp": at(time.Hour)}
			for k, v := range c.times {
				if v == nil {
					delete(claims, k)
					continue
				}
				claims[k] = v
			}
			token := jwttest.SignWith(t, key, "k", claims)
			_, kubeOK, kubeErr := kube.AuthenticateToken(ctx, token)
			_, ourOK, ourErr := ours.AuthenticateToken(ctx, token)
			kubeTakes, weTake := kubeOK && kubeErr == nil, ourOK && ourErr == nil
			if kubeTakes != c.accept {
				t.Fatalf("kube-apiserver: accepted %v (%v), the case says %v: fix the case", kubeTakes, kubeErr, c.accept)
			}
			if weTake != kubeTakes {
				t.Fatalf("ours accepted %v (%v), kube-apiserver %v (%v)", weTake, ourErr, kubeTakes, kubeErr)
			}
		})
	}

	// kube-apiserver does not check iat at all; an issuer whose clock
	// runs ahead would hand out tokens that live that much longer, so
	// ours refuses iat beyond the nbf rule: stricter, never weaker.
	token := jwttest.SignWith(t, key, "k", map[string]any{"iss": issuer, "aud": "cluster-a", "username": "alice", "iat": at(90 * time.Second), "exp": at(time.Hour)})
	if _, ok, err := kube.AuthenticateToken(ctx, token); !ok || err != nil {
		t.Fatalf("kube-apiserver now refuses iat 90 s ahead (%v): make this case one of the same above", err)
	}
	if _, ok, err := ours.AuthenticateToken(ctx, token); ok || err == nil {
		t.Fatal("ours accepts iat 90 s ahead with no skew allowed")
	}

	// kube-apiserver (go-oidc v2) reads nbf through a json.Number, which
	// also takes a number in a string; RFC 7519 makes a NumericDate a JSON
	// number, and ours refuses anything else: stricter, never weaker.
	// (kube also drops nbf's fraction of a second, ours keeps it: at most
	// one second stricter.) exp and iat are read by go-oidc on both sides,
	// the same way: the cases above hold that.
	token = jwttest.SignWith(t, key, "k", map[string]any{"iss": issuer, "aud": "cluster-a", "username": "alice", "iat": at(0), "nbf": strconv.FormatInt(at(-time.Minute), 10), "exp": at(time.Hour)})
	if _, ok, err := kube.AuthenticateToken(ctx, token); !ok || err != nil {
		t.Fatalf("kube-apiserver now refuses an nbf in a string (%v): make this case one of the same above", err)
	}
	if _, ok, err := ours.AuthenticateToken(ctx, token); ok || err == nil {
		t.Fatal("ours accepts an nbf in a string")
	}
}
