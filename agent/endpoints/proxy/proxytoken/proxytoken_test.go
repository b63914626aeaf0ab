package proxytoken_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
)

var (
	t0   = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	mine = proxytoken.ForInstall("0b7e5c4e-1111-4c53-9d2e-6f1c1d2f3a4b")
)

func alice() *user.DefaultInfo {
	return &user.DefaultInfo{
		Name:   "alice@example.com",
		UID:    "u-123",
		Groups: []string{"devs", "ops"},
		Extra:  map[string][]string{"example.com/team": {"blue", "green"}},
	}
}

func newKey(t testing.TB) *proxytoken.Key {
	t.Helper()
	k, err := proxytoken.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keySet(keys ...*proxytoken.Key) *proxytoken.KeySet {
	ks := &proxytoken.KeySet{Verify: map[string]*ecdsa.PublicKey{}}
	for _, k := range keys {
		ks.Verify[k.ID] = &k.Private.PublicKey
	}
	if len(keys) > 0 {
		ks.Signing = keys[0]
	}
	return ks
}

func sign(t testing.TB, k *proxytoken.Key, a proxytoken.Audience, u user.Info, ttl time.Duration, now time.Time) string {
	t.Helper()
	tok, _, _, err := proxytoken.Sign(k, a, u, ttl, now)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// payload is what an attacker controls when minting a token by hand.
type payload struct {
	jwt.Claims
	Username string              `json:"username"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

func goodPayload(a proxytoken.Audience, now time.Time) payload {
	return payload{
		Claims: jwt.Claims{
			Issuer: a.Issuer, Audience: jwt.Audience{a.Audience}, Subject: "alice@example.com", ID: "some-id",
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-30 * time.Second)),
			Expiry: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		Username: "alice@example.com",
		Groups:   []string{"devs"},
	}
}

// mint signs claims with any key and algorithm go-jose supports, claiming
// key ID kid and type typ: the forgeries an attacker could make.
func mint(t testing.TB, alg jose.SignatureAlgorithm, key any, kid, typ string, claims any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func b64(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestRoundTrip(t *testing.T) {
	k := newKey(t)
	in := alice()
	in.Extra[proxytoken.CredentialIDExtra] = []string{"JTI=chosen-by-the-caller"}
	tok, exp, jti, err := proxytoken.Sign(k, mine, in, 5*time.Minute, t0.Add(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(t0.Add(5*time.Minute)) || len(jti) != 22 {
		t.Fatalf("exp %v jti %q", exp, jti)
	}
	if !proxytoken.Ours(tok) {
		t.Fatal("Ours refuses our own token")
	}
	got, gotExp, err := proxytoken.Verify(keySet(k), mine, tok, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := &user.DefaultInfo{Name: "alice@example.com", UID: "u-123", Groups: []string{"devs", "ops"},
		Extra: map[string][]string{"example.com/team": {"blue", "green"}, proxytoken.CredentialIDExtra: {"JTI=" + jti}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	if !gotExp.Equal(exp) {
		t.Fatalf("expiry %v, signed %v", gotExp, exp)
	}
	// The header names the key and the type; the caller's extra was not kept.
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Headers[0].KeyID != k.ID || parsed.Headers[0].ExtraHeaders[jose.HeaderType] != proxytoken.Type {
		t.Fatalf("header %+v", parsed.Headers[0])
	}
	if in.Extra[proxytoken.CredentialIDExtra][0] != "JTI=chosen-by-the-caller" {
		t.Fatal("Sign changed the caller's user")
	}
	// A second token for the same user has its own ID.
	_, _, jti2, _ := proxytoken.Sign(k, mine, in, 5*time.Minute, t0)
	if jti2 == jti {
		t.Fatal("two tokens share a jti")
	}
	// A user with no UID, groups or extras.
	tok = sign(t, k, mine, &user.DefaultInfo{Name: "bob"}, time.Minute, t0)
	got, _, err = proxytoken.Verify(keySet(k), mine, tok, t0)
	if err != nil || got.GetName() != "bob" || got.GetUID() != "" || len(got.GetGroups()) != 0 || len(got.GetExtra()) != 1 {
		t.Fatalf("%v %#v", err, got)
	}
}

func TestKeys(t *testing.T) {
	k := newKey(t)
	id, err := proxytoken.KeyID(&k.Private.PublicKey)
	if err != nil || id != k.ID || len(id) != 43 {
		t.Fatalf("KeyID %q, %v; Key.ID %q", id, err, k.ID)
	}
	again, err := proxytoken.KeyFor(k.Private)
	if err != nil || again.ID != k.ID {
		t.Fatalf("KeyFor: %v", err)
	}
	if other := newKey(t); other.ID == k.ID {
		t.Fatal("two keys share an ID")
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proxytoken.KeyFor(p384); err == nil {
		t.Fatal("KeyFor accepted a P-384 key")
	}
	if _, err := proxytoken.KeyFor(nil); err == nil {
		t.Fatal("KeyFor accepted nil")
	}
}

func TestVerifyTime(t *testing.T) {
	k := newKey(t)
	tok, exp, _, err := proxytoken.Sign(k, mine, alice(), time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	ks := keySet(k)
	for _, tc := range []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"at expiry", exp, true},
		{"expired by 1 s", exp.Add(time.Second), false},
		{"a replica 29 s behind", t0.Add(-29 * time.Second), true},
		{"nbf in the future", t0.Add(-31 * time.Second), false},
	} {
		_, _, err := proxytoken.Verify(ks, mine, tok, tc.at)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
}

func TestVerifyRefuses(t *testing.T) {
	k, other := newKey(t), newKey(t)
	ks := keySet(k)
	theirs := proxytoken.ForInstall("another-installation")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.Private.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	good := sign(t, k, mine, alice(), time.Hour, t0)
	parts := strings.Split(good, ".")
	header := struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}{"none", k.ID, proxytoken.Type}

	noExp := goodPayload(mine, t0)
	noExp.Expiry = nil
	otherIss, otherAud := goodPayload(mine, t0), goodPayload(mine, t0)
	otherIss.Issuer, otherAud.Audience = theirs.Issuer, jwt.Audience{theirs.Audience}
	tampered := goodPayload(mine, t0)
	tampered.Username, tampered.Subject = "admin", "admin"
	noID := goodPayload(mine, t0)
	noID.ID = ""
	subDiffers := goodPayload(mine, t0)
	subDiffers.Subject = "bob"

	for _, tc := range []struct {
		name  string
		token string
		aud   proxytoken.Audience
	}{
		{"unknown kid", sign(t, other, mine, alice(), time.Hour, t0), mine},
		{"known kid, signed by another key", mint(t, jose.ES256, other.Private, k.ID, proxytoken.Type, goodPayload(mine, t0)), mine},
		{"another installation's token", sign(t, k, theirs, alice(), time.Hour, t0), mine},
		{"our token at another installation", good, theirs},
		{"another issuer", mint(t, jose.ES256, k.Private, k.ID, proxytoken.Type, otherIss), mine},
		{"another audience", mint(t, jose.ES256, k.Private, k.ID, proxytoken.Type, otherAud), mine},
		{"alg none", b64(t, header) + "." + b64(t, goodPayload(mine, t0)) + ".", mine},
		{"HS256 keyed with the public key (DER)", mint(t, jose.HS256, pubDER, k.ID, proxytoken.Type, goodPayload(mine, t0)), mine},
		{"HS256 keyed with the public key (PEM)", mint(t, jose.HS256, pubPEM, k.ID, proxytoken.Type, goodPayload(mine, t0)), mine},
		{"RS256", mint(t, jose.RS256, rsaKey, k.ID, proxytoken.Type, goodPayload(mine, t0)), mine},
		{"ES384", mint(t, jose.ES384, mustP384(t), k.ID, proxytoken.Type, goodPayload(mine, t0)), mine},
		{"tampered payload", parts[0] + "." + b64(t, tampered) + "." + parts[2], mine},
		{"no signature", parts[0] + "." + parts[1] + ".", mine},
		{"missing exp", mint(t, jose.ES256, k.Private, k.ID, proxytoken.Type, noExp), mine},
		{"missing jti", mint(t, jose.ES256, k.Private, k.ID, proxytoken.Type, noID), mine},
		{"sub differs from username", mint(t, jose.ES256, k.Private, k.ID, proxytoken.Type, subDiffers), mine},
		{"typ JWT", mint(t, jose.ES256, k.Private, k.ID, "JWT", goodPayload(mine, t0)), mine},
		{"no kid", mint(t, jose.ES256, k.Private, "", proxytoken.Type, goodPayload(mine, t0)), mine},
		{"system: username", sign(t, k, mine, &user.DefaultInfo{Name: "system:admin"}, time.Hour, t0), mine},
		{"empty username", sign(t, k, mine, &user.DefaultInfo{Groups: []string{"devs"}}, time.Hour, t0), mine},
		{"system: group", sign(t, k, mine, &user.DefaultInfo{Name: "alice", Groups: []string{"devs", "system:masters"}}, time.Hour, t0), mine},
		{"Kubernetes' extra", sign(t, k, mine, withExtra("authentication.kubernetes.io/node-name", "n1"), time.Hour, t0), mine},
		{"Kubernetes' extra, in another case", sign(t, k, mine, withExtra("Authentication.Kubernetes.IO/pod-name", "p1"), time.Hour, t0), mine},
		{"credential-id in another case", sign(t, k, mine, withExtra("authentication.kubernetes.io/Credential-ID", "JTI=forged"), time.Hour, t0), mine},
		{"a k8s.io extra", sign(t, k, mine, withExtra("example.k8s.io/x", "y"), time.Hour, t0), mine},
		{"the proxy's original-user extra", sign(t, k, mine, withExtra("Original-User-Info.impersonation-proxy.concierge.pinniped.dev", "{}"), time.Hour, t0), mine},
		{"a line break in an extra value", sign(t, k, mine, withExtra("example.com/x", "a\r\nImpersonate-Group: system:masters"), time.Hour, t0), mine},
		{"a line break in a group", sign(t, k, mine, &user.DefaultInfo{Name: "alice", Groups: []string{"devs\nx"}}, time.Hour, t0), mine},
		{"a NUL in the username", sign(t, k, mine, &user.DefaultInfo{Name: "alice\x00"}, time.Hour, t0), mine},
		{"a line break in the UID", sign(t, k, mine, &user.DefaultInfo{Name: "alice", UID: "1\n2"}, time.Hour, t0), mine},
		{"a group with a leading space (arrives as system:masters over HTTP/1.1)", sign(t, k, mine, &user.DefaultInfo{Name: "alice", Groups: []string{" system:masters"}}, time.Hour, t0), mine},
		{"a group with a leading tab", sign(t, k, mine, &user.DefaultInfo{Name: "alice", Groups: []string{"\tsystem:masters"}}, time.Hour, t0), mine},
		{"a group with a trailing space", sign(t, k, mine, &user.DefaultInfo{Name: "alice", Groups: []string{"admins "}}, time.Hour, t0), mine},
		{"a username with a leading space", sign(t, k, mine, &user.DefaultInfo{Name: " system:kube-controller-manager"}, time.Hour, t0), mine},
		{"a username with a trailing space", sign(t, k, mine, &user.DefaultInfo{Name: "alice "}, time.Hour, t0), mine},
		{"a UID with a trailing space", sign(t, k, mine, &user.DefaultInfo{Name: "alice", UID: "42 "}, time.Hour, t0), mine},
		{"an extra value with a leading space", sign(t, k, mine, withExtra("example.com/x", " y"), time.Hour, t0), mine},
		{"an extra key in capitals (the API server lowercases it)", sign(t, k, mine, withExtra("Example.com/x", "y"), time.Hour, t0), mine},
		{"no audience configured", good, proxytoken.Audience{}},
		{"JSON serialization", `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, mine},
		{"garbage", "a.b.c", mine},
		{"empty", "", mine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _, err := proxytoken.Verify(ks, tc.aud, tc.token, t0)
			if err == nil || u != nil {
				t.Fatalf("accepted: %v", u)
			}
			for _, secret := range []string{"alice", "devs", k.ID} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q repeats the token's content", err)
				}
			}
		})
	}
	// The same claims signed properly are accepted: the cases above fail for
	// the reason they name, not for the claims.
	if _, _, err := proxytoken.Verify(ks, mine, mint(t, jose.ES256, k.Private, k.ID, proxytoken.Type, goodPayload(mine, t0)), t0); err != nil {
		t.Fatalf("control: %v", err)
	}
	// No keys yet: refused.
	if _, _, err := proxytoken.Verify(&proxytoken.KeySet{}, mine, good, t0); err == nil {
		t.Fatal("accepted with no keys")
	}
	if _, _, err := proxytoken.Verify(nil, mine, good, t0); err == nil {
		t.Fatal("accepted with a nil key set")
	}
}

// withExtra is alice with one more extra.
func withExtra(key, value string) *user.DefaultInfo {
	u := alice()
	u.Extra[key] = []string{value}
	return u
}

func mustP384(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSize(t *testing.T) {
	k := newKey(t)
	many := &user.DefaultInfo{Name: "alice"}
	for i := 0; len(many.Groups)*20 < proxytoken.MaxSize; i++ {
		many.Groups = append(many.Groups, strings.Repeat("g", 19))
	}
	if _, _, _, err := proxytoken.Sign(k, mine, many, time.Hour, t0); !errors.Is(err, proxytoken.ErrTooLarge) {
		t.Fatalf("Sign made an oversize token: %v", err)
	}
	// A validly signed token over the limit is refused before it is parsed.
	big := mint(t, jose.ES256, k.Private, k.ID, proxytoken.Type, payload{
		Claims: goodPayload(mine, t0).Claims, Username: "alice@example.com", Groups: many.Groups})
	if len(big) <= proxytoken.MaxSize {
		t.Fatalf("test token only %d bytes", len(big))
	}
	if _, _, err := proxytoken.Verify(keySet(k), mine, big, t0); !errors.Is(err, proxytoken.ErrTooLarge) {
		t.Fatalf("oversize token: %v", err)
	}
	if _, _, err := proxytoken.Verify(keySet(k), mine, strings.Repeat("a", proxytoken.MaxSize+1), t0); !errors.Is(err, proxytoken.ErrTooLarge) {
		t.Fatalf("oversize garbage: %v", err)
	}
}

func TestOurs(t *testing.T) {
	k := newKey(t)
	good := sign(t, k, mine, alice(), time.Hour, t0)
	parts := strings.Split(good, ".")
	hdr := func(v any) string { return b64(t, v) }
	saLike := mint(t, jose.ES256, k.Private, k.ID, "JWT", goodPayload(mine, t0))
	for _, tc := range []struct {
		name  string
		token string
		want  bool
	}{
		{"ours", good, true},
		{"ours from another installation", sign(t, newKey(t), proxytoken.ForInstall("x"), alice(), time.Hour, t0), true},
		{"ours, expired and tampered", parts[0] + ".e30." + parts[2], true},
		{"ServiceAccount-like JWT", saLike, false},
		{"no typ", hdr(map[string]string{"alg": "RS256"}) + ".e30.sig", false},
		{"typ in another case", hdr(map[string]string{"typ": strings.ToUpper(proxytoken.Type)}) + ".e30.sig", false},
		{"two parts", parts[0] + "." + parts[1], false},
		{"four parts", good + ".x", false},
		{"header not base64url", "!" + parts[0][1:] + ".e30.sig", false},
		{"header not JSON", base64.RawURLEncoding.EncodeToString([]byte("typ")) + ".e30.sig", false},
		{"header over 1 KiB", hdr(map[string]string{"typ": proxytoken.Type, "pad": strings.Repeat("x", 1<<10)}) + ".e30.sig", false},
		{"opaque token", "abcdef0123456789", false},
		{"empty", "", false},
	} {
		if got := proxytoken.Ours(tc.token); got != tc.want {
			t.Errorf("%s: Ours = %v", tc.name, got)
		}
	}
}

// fuzzKey is fixed so that golden, the seed of FuzzVerify, stays valid.
func fuzzKey(t testing.TB) *proxytoken.Key {
	t.Helper()
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), []byte("proxytoken fuzz key: 32 bytes..."))
	if err != nil {
		t.Fatal(err)
	}
	k, err := proxytoken.KeyFor(priv)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// golden is alice's token signed by fuzzKey at t0 for an hour, by Sign as it
// was when the format was introduced. It is fixed (ECDSA signatures and jti
// are random) so that every fuzz worker checks against the same token.
const golden = "eyJhbGciOiJFUzI1NiIsImtpZCI6Im9CMHp0aGRpb203SGlRUHJzRG5hNFYwZDVWdi1Ba1AxU2JaZEJfNVhIUFkiLCJ0eXAiOiJwaW5uaXBlZC1wcm94eStqd3QifQ.eyJhdWQiOiJ1cm46cGlubmlwZWQ6aW1wZXJzb25hdGlvbi1wcm94eTowYjdlNWM0ZS0xMTExLTRjNTMtOWQyZS02ZjFjMWQyZjNhNGIiLCJleHAiOjE4OTM1NTcwNDUsImV4dHJhIjp7ImF1dGhlbnRpY2F0aW9uLmt1YmVybmV0ZXMuaW8vY3JlZGVudGlhbC1pZCI6WyJKVEk9bHc5M1JkZkxhVlFUR09NWllKWWdZQSJdLCJleGFtcGxlLmNvbS90ZWFtIjpbImJsdWUiLCJncmVlbiJdfSwiZ3JvdXBzIjpbImRldnMiLCJvcHMiXSwiaWF0IjoxODkzNTUzNDQ1LCJpc3MiOiJ1cm46cGlubmlwZWQ6YWdlbnQ6MGI3ZTVjNGUtMTExMS00YzUzLTlkMmUtNmYxYzFkMmYzYTRiIiwianRpIjoibHc5M1JkZkxhVlFUR09NWllKWWdZQSIsIm5iZiI6MTg5MzU1MzQxNSwic3ViIjoiYWxpY2VAZXhhbXBsZS5jb20iLCJ1aWQiOiJ1LTEyMyIsInVzZXJuYW1lIjoiYWxpY2VAZXhhbXBsZS5jb20ifQ.1Pp-1ewDYexWyM0GDrc62jAWPO5eM35LtZIRIVPyI1yQB5dI_i5X_i8PNmrwxbij32PsrWpHoAWoxenS1qZH7A"

// TestGoldenToken: a token signed by an earlier version still verifies to
// the same user. Replicas of two versions run side by side during a rolling
// upgrade, so the format must not drift.
func TestGoldenToken(t *testing.T) {
	u, exp, err := proxytoken.Verify(keySet(fuzzKey(t)), mine, golden, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := alice()
	want.Extra[proxytoken.CredentialIDExtra] = []string{"JTI=lw93RdfLaVQTGOMZYJYgYA"}
	if !reflect.DeepEqual(u, want) || !exp.Equal(t0.Add(time.Hour)) {
		t.Fatalf("golden token: %#v until %v", u, exp)
	}
	if !proxytoken.Ours(golden) {
		t.Fatal("Ours refuses the golden token")
	}
}

// FuzzVerify: Verify never panics, and whatever it accepts was signed by our
// key for our audience: the golden token, or another encoding of it (base64
// with other trailing bits, the other ECDSA signature (r, n-s)).
func FuzzVerify(f *testing.F) {
	k := fuzzKey(f)
	ks := keySet(k)
	want, wantExp, err := proxytoken.Verify(ks, mine, golden, t0)
	if err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(golden, ".")
	f.Add(golden)
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(parts[0] + ".e30." + parts[2])
	f.Add(strings.Replace(golden, "e", "f", 1))
	f.Add(mint(f, jose.HS256, []byte("0123456789abcdef0123456789abcdef"), k.ID, proxytoken.Type, goodPayload(mine, t0)))
	f.Add("")
	f.Add("..")
	f.Fuzz(func(t *testing.T, tok string) {
		proxytoken.Ours(tok)
		u, exp, err := proxytoken.Verify(ks, mine, tok, t0)
		if err != nil {
			return
		}
		if !reflect.DeepEqual(u, want) || !exp.Equal(wantExp) {
			t.Fatalf("accepted a token we did not sign: %q", tok)
		}
	})
}
