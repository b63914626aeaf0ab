// Package proxytoken is the format of the bearer tokens the agent issues for
// its impersonation proxy: a JWS (ES256 only) whose claims name the user, and
// which only the proxy of the installation that signed it accepts.
//
// A token, unlike a client certificate, does not change the TLS
// configuration of a client that renews it, so long-lived clients keep their
// connections and streams across renewals. Source issues them as the
// exchange's cluster credentials.
package proxytoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/authentication/identityrule"
)

// Type is the JWS "typ" header of every proxy token; nothing else uses it, so
// the proxy can tell its own tokens from ServiceAccount or ID tokens without
// checking a signature, and no ID-token or ServiceAccount verifier can take
// one of ours for one of theirs.
const Type = "pinniped-proxy+jwt"

// CredentialIDExtra is Kubernetes' extra key naming the credential used
// ("JTI=<jti>"), as for ServiceAccount tokens: the API server's audit log
// then shows which token a request came with.
const CredentialIDExtra = "authentication.kubernetes.io/credential-id"

// MaxSize bounds a token: Verify refuses longer tokens before parsing, and
// Sign refuses to make them (ErrTooLarge).
const MaxSize = 16 << 10

// ErrTooLarge is returned for a token longer than MaxSize.
var ErrTooLarge = errors.New("proxy token larger than 16 KiB")

// maxHeader bounds the encoded protected header Ours decodes: ours are about
// 150 bytes, and a cheap check must stay cheap whatever it is sent.
const maxHeader = 1 << 10

// notBeforeSkew is how far before its issue a token is valid, for replicas
// whose clocks are behind the signer's.
const notBeforeSkew = 30 * time.Second

// algorithms is the only signature algorithm accepted. Anything else (none,
// HMAC keyed with the public key, RSA) is refused before any key is used.
var algorithms = []jose.SignatureAlgorithm{jose.ES256}

// Audience binds a token to one installation's proxy.
type Audience struct{ Issuer, Audience string }

// ForInstall is the audience of the installation whose token-key Secret has
// UID installID.
func ForInstall(installID string) Audience {
	return Audience{
		Issuer:   "urn:pinniped:agent:" + installID,
		Audience: "urn:pinniped:impersonation-proxy:" + installID,
	}
}

// Key is an ES256 (P-256) signing key; ID is its RFC 7638 thumbprint
// (SHA-256, base64url, no padding).
type Key struct {
	ID      string
	Private *ecdsa.PrivateKey
}

// NewKey makes a new P-256 key.
func NewKey() (*Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate a P-256 key: %w", err)
	}
	return KeyFor(priv)
}

// KeyFor wraps priv, computing its ID; it refuses a key not on P-256.
func KeyFor(priv *ecdsa.PrivateKey) (*Key, error) {
	if priv == nil {
		return nil, errors.New("no private key")
	}
	id, err := KeyID(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	return &Key{ID: id, Private: priv}, nil
}

// KeyID is the RFC 7638 thumbprint of a P-256 public key.
func KeyID(pub *ecdsa.PublicKey) (string, error) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return "", errors.New("proxy token keys must be ECDSA P-256")
	}
	tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// KeySet is what a replica signs and verifies with. Signing may be nil on a
// replica that only verifies. Verify maps key ID to public key and includes
// the signing key's public half.
type KeySet struct {
	Signing *Key
	Verify  map[string]*ecdsa.PublicKey
}

// claims is the payload of a token.
type claims struct {
	jwt.Claims
	Username string              `json:"username"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups"`
	Extra    map[string][]string `json:"extra"`
}

// Sign makes a token for u valid from now for ttl: iss/aud from a, sub =
// username, iat, nbf = now-30s, exp = now+ttl, jti = 128 random bits
// base64url; private claims username, uid (omitempty), groups, extra.
// extra[CredentialIDExtra] is always exactly ["JTI=<jti>"] (replacing any
// given value).
func Sign(k *Key, a Audience, u user.Info, ttl time.Duration, now time.Time) (token string, exp time.Time, jti string, err error) {
	if k == nil || k.Private == nil || k.ID == "" {
		return "", time.Time{}, "", errors.New("no proxy token signing key")
	}
	if u == nil {
		return "", time.Time{}, "", errors.New("no user to sign a proxy token for")
	}
	var random [16]byte
	if _, err := rand.Read(random[:]); err != nil {
		return "", time.Time{}, "", fmt.Errorf("token ID: %w", err)
	}
	jti = base64.RawURLEncoding.EncodeToString(random[:])
	// Whole seconds: NumericDate has no more, and the caller must learn the
	// expiry the token really carries.
	now = now.Truncate(time.Second)
	exp = now.Add(ttl).Truncate(time.Second)

	extra := make(map[string][]string, len(u.GetExtra())+1)
	for key, v := range u.GetExtra() {
		extra[key] = append([]string(nil), v...)
	}
	extra[CredentialIDExtra] = []string{"JTI=" + jti}
	c := claims{
		Claims: jwt.Claims{
			Issuer:    a.Issuer,
			Audience:  jwt.Audience{a.Audience},
			Subject:   u.GetName(),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now.Add(-notBeforeSkew)),
			Expiry:    jwt.NewNumericDate(exp),
			ID:        jti,
		},
		Username: u.GetName(),
		UID:      u.GetUID(),
		Groups:   append([]string{}, u.GetGroups()...),
		Extra:    extra,
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.Private, KeyID: k.ID}},
		(&jose.SignerOptions{}).WithType(Type))
	if err != nil {
		return "", time.Time{}, "", fmt.Errorf("proxy token signer: %w", err)
	}
	token, err = jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		return "", time.Time{}, "", fmt.Errorf("sign a proxy token: %w", err)
	}
	if len(token) > MaxSize {
		return "", time.Time{}, "", ErrTooLarge
	}
	return token, exp, jti, nil
}

// Ours reports, without any signature check, whether token is shaped as
// ours: three dot-separated parts and a protected header (at most 1 KiB,
// base64url, JSON) whose typ is Type.
func Ours(token string) bool {
	if strings.Count(token, ".") != 2 {
		return false
	}
	header, _, _ := strings.Cut(token, ".")
	if len(header) > maxHeader {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return false
	}
	var h struct {
		Typ string `json:"typ"`
	}
	return json.Unmarshal(raw, &h) == nil && h.Typ == Type
}

// Verify checks signature (ES256 only), kid known in ks.Verify, iss and aud
// equal to a, exp present and not passed (no leeway), nbf not in the future,
// non-empty username, no "system:" username or group, no extra in
// Kubernetes' domains but CredentialIDExtra. It returns the user (a
// *user.DefaultInfo with Extra incl. CredentialIDExtra) and the expiry.
//
// Errors say what is wrong with the token, never what it contains.
func Verify(ks *KeySet, a Audience, token string, now time.Time) (user.Info, time.Time, error) {
	if len(token) > MaxSize {
		return nil, time.Time{}, ErrTooLarge
	}
	if a.Issuer == "" || a.Audience == "" {
		// jwt.Expected skips empty fields: never verify against nothing.
		return nil, time.Time{}, errors.New("no proxy token audience configured")
	}
	if ks == nil || len(ks.Verify) == 0 {
		return nil, time.Time{}, errors.New("no proxy token keys to verify with yet")
	}
	parsed, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("not an ES256 proxy token: %w", err)
	}
	if len(parsed.Headers) != 1 {
		return nil, time.Time{}, errors.New("proxy token must have exactly one signature")
	}
	h := parsed.Headers[0]
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != Type {
		return nil, time.Time{}, errors.New("not a proxy token (typ)")
	}
	pub, ok := ks.Verify[h.KeyID]
	if !ok || h.KeyID == "" {
		return nil, time.Time{}, errors.New("proxy token signed by an unknown key (another installation, or a key retired since)")
	}
	var c claims
	if err := parsed.Claims(pub, &c); err != nil {
		return nil, time.Time{}, fmt.Errorf("proxy token signature: %w", err)
	}
	if c.Expiry == nil {
		return nil, time.Time{}, errors.New("proxy token has no expiry")
	}
	if c.ID == "" {
		return nil, time.Time{}, errors.New("proxy token has no ID")
	}
	// iat is not checked: nbf (iat-30s) is the bound, so that a replica whose
	// clock is a little behind the signer's accepts a fresh token. No leeway
	// on exp: a token lives exactly as long as it says.
	timed := c.Claims
	timed.IssuedAt = nil
	if err := timed.ValidateWithLeeway(jwt.Expected{Issuer: a.Issuer, AnyAudience: jwt.Audience{a.Audience}, Time: now}, 0); err != nil {
		return nil, time.Time{}, fmt.Errorf("proxy token refused: %w", err)
	}
	switch {
	case c.Username == "":
		return nil, time.Time{}, errors.New("proxy token has no username")
	case c.Subject != c.Username:
		return nil, time.Time{}, errors.New("proxy token subject and username differ")
	}
	if err := CheckUser(&user.DefaultInfo{Name: c.Username, UID: c.UID, Groups: c.Groups, Extra: c.Extra}); err != nil {
		return nil, time.Time{}, err
	}
	extra := make(map[string][]string, len(c.Extra)+1)
	for k, v := range c.Extra {
		extra[k] = v
	}
	extra[CredentialIDExtra] = []string{"JTI=" + c.ID}
	return &user.DefaultInfo{Name: c.Username, UID: c.UID, Groups: c.Groups, Extra: extra}, c.Expiry.Time(), nil
}

// CheckUser refuses an identity a proxy token may not carry: Verify refuses
// it, so the issuer refuses it too rather than hand out a token nobody
// accepts. It is identityrule.External, the rule of every credential of
// the agent; errors name the rule, never the value.
func CheckUser(u user.Info) error {
	if err := identityrule.External(u); err != nil {
		return fmt.Errorf("proxy token refused: %w", err)
	}
	return nil
}
