package impersonator_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/impersonator"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
)

// forge is tok with its signature changed: a token of our shape, of a key
// we know, that only a signature check can refuse.
func forge(t *testing.T, tok string) string {
	t.Helper()
	i := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	sig[0] ^= 0xff
	return tok[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
}

// TestProxyTokensRememberRefusals: a refused token sent again is refused
// without another signature check, under the same keys and audience and
// for 10 seconds; a change of keys or audience verifies it again at once;
// and a refusal that time alone ends (not yet valid) or that a Set ends
// (no keys yet) never outlasts its cause.
func TestProxyTokensRememberRefusals(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	k1, k2 := newKey(t), newKey(t)
	p := &impersonator.ProxyTokens{Now: func() time.Time { return now }}
	checks := impersonator.CountVerifications(p)
	// authn says whether tok was accepted as alice, and how many signature
	// checks that took.
	authn := func(tok string) (bool, int64, error) {
		t.Helper()
		before := checks.Load()
		resp, ours, err := p.AuthenticateProxyToken(tok)
		if !ours {
			t.Fatal("a proxy token was not recognized as ours")
		}
		return err == nil && resp != nil && resp.User.GetName() == "alice", checks.Load() - before, err
	}
	good, _ := signFor(t, k1, testAudience, "alice", time.Hour, t0)
	forged := forge(t, good)

	// No keys yet: refused at no cost, and not remembered past the Set
	// that brings them.
	if ok, n, err := authn(good); ok || n != 0 || err == nil {
		t.Fatalf("before any keys: accepted %v, %d checks, %v", ok, n, err)
	}
	p.Set(keySet(k1), testAudience)
	if ok, n, _ := authn(good); !ok || n != 1 {
		t.Fatalf("once keys are set: accepted %v, %d checks", ok, n)
	}

	// A forged token: one check, then none while the refusal holds, with
	// the same error each time (the log's reason stays right).
	_, n, first := authn(forged)
	if first == nil || n != 1 {
		t.Fatalf("the forged token: %v, %d checks", first, n)
	}
	for range 5 {
		if ok, n, err := authn(forged); ok || n != 0 || err == nil || err.Error() != first.Error() {
			t.Fatalf("the forged token again: accepted %v, %d checks, %v; want the same refusal without a check", ok, n, err)
		}
	}
	// The good token is unaffected by the refusal of its forgery.
	if ok, n, _ := authn(good); !ok || n != 0 {
		t.Fatalf("the good token after its forgery: accepted %v, %d checks", ok, n)
	}
	// 10 seconds on, checked again (and remembered again).
	now = t0.Add(10 * time.Second)
	if ok, n, _ := authn(forged); ok || n != 1 {
		t.Fatalf("the forged token past the refusal's TTL: accepted %v, %d checks", ok, n)
	}
	if ok, n, _ := authn(forged); ok || n != 0 {
		t.Fatalf("the forged token, refused again: accepted %v, %d checks", ok, n)
	}

	// A change of keys drops the refusals: a token of a key this replica
	// had not yet received works the moment the key comes.
	early, _ := signFor(t, k2, testAudience, "alice", time.Hour, t0)
	if ok, n, _ := authn(early); ok || n != 1 {
		t.Fatalf("a token of an unknown key: accepted %v, %d checks", ok, n)
	}
	if ok, n, _ := authn(early); ok || n != 0 {
		t.Fatalf("a token of an unknown key again: accepted %v, %d checks", ok, n)
	}
	p.Set(keySet(k1, k2), testAudience)
	if ok, n, err := authn(early); !ok || n != 1 {
		t.Fatalf("once its key is set: accepted %v, %d checks, %v", ok, n, err)
	}
	if ok, n, _ := authn(forged); ok || n != 1 {
		t.Fatalf("the forged token after a change of keys: accepted %v, %d checks; want checked again", ok, n)
	}
	// And so does a change of audience.
	other := proxytoken.ForInstall("another-install")
	p.Set(keySet(k1, k2), other)
	if ok, n, _ := authn(good); ok || n != 1 {
		t.Fatalf("under another audience: accepted %v, %d checks", ok, n)
	}
	p.Set(keySet(k1, k2), testAudience)
	if ok, n, _ := authn(good); !ok || n != 1 {
		t.Fatalf("the audience back: accepted %v, %d checks", ok, n)
	}

	// Not yet valid: never remembered, so the token is accepted the
	// moment its nbf (30 s before its iat) has come.
	future, _ := signFor(t, k1, testAudience, "alice", time.Hour, now.Add(5*time.Minute))
	for range 2 {
		if ok, n, err := authn(future); ok || n != 1 || !errors.Is(err, jwt.ErrNotValidYet) {
			t.Fatalf("a token not yet valid: accepted %v, %d checks, %v; want checked each time", ok, n, err)
		}
	}
	now = now.Add(5*time.Minute - 30*time.Second)
	if ok, n, err := authn(future); !ok || n != 1 {
		t.Fatalf("at its nbf: accepted %v, %d checks, %v", ok, n, err)
	}

	// Expired: time only makes it more so; remembered.
	short, _ := signFor(t, k1, testAudience, "alice", time.Minute, now)
	now = now.Add(2 * time.Minute)
	if ok, n, err := authn(short); ok || n != 1 || !errors.Is(err, jwt.ErrExpired) {
		t.Fatalf("an expired token: accepted %v, %d checks, %v", ok, n, err)
	}
	if ok, n, err := authn(short); ok || n != 0 || !errors.Is(err, jwt.ErrExpired) {
		t.Fatalf("an expired token again: accepted %v, %d checks, %v", ok, n, err)
	}
}
