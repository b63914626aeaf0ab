package proxytoken_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
)

type tokenFixture struct {
	key *proxytoken.Key
	aud proxytoken.Audience
	ca  *certauthority.CA
	now time.Time
}

func newTokenFixture(t *testing.T) *tokenFixture {
	t.Helper()
	key, err := proxytoken.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ca, err := certauthority.New("proxy", time.Hour, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return &tokenFixture{key: key, aud: proxytoken.ForInstall("install-1"), ca: ca, now: now}
}

// source is a Source; haveKey says whether the signing key exists yet.
func (f *tokenFixture) source(haveKey bool) *proxytoken.Source {
	return &proxytoken.Source{
		Key:      func() (*proxytoken.Key, proxytoken.Audience, bool) { return f.key, f.aud, haveKey },
		TTL:      7 * time.Minute,
		Fallback: &clustercred.CA{CA: f.ca},
		Now:      func() time.Time { return f.now },
	}
}

func (f *tokenFixture) keySet() *proxytoken.KeySet {
	return &proxytoken.KeySet{Verify: map[string]*ecdsa.PublicKey{f.key.ID: &f.key.Private.PublicKey}}
}

// TestTokenIssuesAVerifiableToken: the credential is a proxy token the proxy
// accepts as exactly this user, extras included, and no certificate (a new
// certificate is what makes client-go close every connection). Its expiry
// is the token's, and its credential ID names the token's jti.
func TestTokenIssuesAVerifiableToken(t *testing.T) {
	f := newTokenFixture(t)
	alice := &user.DefaultInfo{Name: "alice", UID: "1001", Groups: []string{"devs", "ops"},
		Extra: map[string][]string{"example.com/team": {"a", "b"}, user.CredentialIDKey: {"JTI=from-the-idp"}}}
	got, err := f.source(true).Issue(context.Background(), alice)
	if err != nil {
		t.Fatal(err)
	}
	cred := got.ClusterCredential
	if cred.Token == "" || cred.ClientCertificateData != "" || cred.ClientKeyData != "" {
		t.Fatalf("want a token and no certificate, got %+v", cred)
	}
	u, exp, err := proxytoken.Verify(f.keySet(), f.aud, cred.Token, f.now.Add(time.Minute))
	if err != nil {
		t.Fatalf("the proxy refuses the token: %v", err)
	}
	if !exp.Equal(f.now.Add(7*time.Minute)) || !cred.ExpirationTimestamp.Time.Equal(exp) {
		t.Errorf("expiry %v, token's %v, want %v", cred.ExpirationTimestamp, exp, f.now.Add(7*time.Minute))
	}
	if u.GetName() != "alice" || u.GetUID() != "1001" || !slices.Equal(u.GetGroups(), alice.Groups) ||
		!slices.Equal(u.GetExtra()["example.com/team"], []string{"a", "b"}) {
		t.Errorf("the token names %+v, want %+v", u, alice)
	}
	ids := u.GetExtra()[user.CredentialIDKey]
	if len(ids) != 1 || ids[0] != got.CredentialID || !strings.HasPrefix(got.CredentialID, "JTI=") || got.CredentialID == "JTI=from-the-idp" {
		t.Errorf("credential ID %q, the token's %v", got.CredentialID, ids)
	}
	if _, _, err := proxytoken.Verify(f.keySet(), f.aud, cred.Token, f.now.Add(7*time.Minute+time.Second)); err == nil {
		t.Error("the token outlives its TTL")
	}
}

// TestTokenTTLDefaultsAsCertificates: without a TTL, tokens live as long as
// the CA source's certificates.
func TestTokenTTLDefaultsAsCertificates(t *testing.T) {
	f := newTokenFixture(t)
	iss := f.source(true)
	iss.TTL = 0
	got, err := iss.Issue(context.Background(), &user.DefaultInfo{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if want := f.now.Add(clustercred.DefaultTTL); !got.ExpirationTimestamp.Time.Equal(want) {
		t.Fatalf("expires %v, want %v", got.ExpirationTimestamp, want)
	}
}

// manyGroups makes a user whose token would exceed proxytoken.MaxSize.
func manyGroups() []string {
	groups := make([]string, 600)
	for i := range groups {
		groups[i] = fmt.Sprintf("a-rather-long-directory-group-name-%04d", i)
	}
	return groups
}

// TestTokenFallsBackToCertificates: with no signing key yet, or for a user
// whose token would be too large to send, the user gets the fallback's
// certificate instead, with no credential ID.
func TestTokenFallsBackToCertificates(t *testing.T) {
	f := newTokenFixture(t)
	for name, c := range map[string]struct {
		haveKey bool
		groups  []string
	}{
		"no key":    {false, []string{"devs"}},
		"too large": {true, manyGroups()},
	} {
		got, err := f.source(c.haveKey).Issue(context.Background(), &user.DefaultInfo{Name: "alice", Groups: c.groups})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Token != "" || got.ClientCertificateData == "" || got.CredentialID != "" {
			t.Errorf("%s: want a certificate, got token %v, credential ID %q", name, got.Token != "", got.CredentialID)
		}
	}
	none := f.source(false)
	none.Fallback = nil
	if _, err := none.Issue(context.Background(), &user.DefaultInfo{Name: "alice"}); !errors.Is(err, clustercred.ErrNoStrategy) {
		t.Errorf("no key and no fallback: %v", err)
	}
}

// TestTokenRefusesExtrasItCannotCarry: when a certificate would be issued
// instead of a token, a user with extras is refused, not given a
// certificate that silently drops them.
func TestTokenRefusesExtrasItCannotCarry(t *testing.T) {
	f := newTokenFixture(t)
	extra := map[string][]string{"example.com/team": {"a"}}
	for name, c := range map[string]struct {
		haveKey bool
		groups  []string
	}{
		"no key":    {false, nil},
		"too large": {true, manyGroups()},
	} {
		_, err := f.source(c.haveKey).Issue(context.Background(), &user.DefaultInfo{Name: "alice", Groups: c.groups, Extra: maps.Clone(extra)})
		var extraErr *clustercred.ExtraError
		if !errors.As(err, &extraErr) || extraErr.Key != "example.com/team" {
			t.Errorf("%s: got %v, want the extra refused", name, err)
		}
	}
}

// TestTokenRefusesWhatTheProxyWouldRefuse: an identity the proxy's Verify
// refuses (an extra in Kubernetes' own domains) gets no token, rather than
// one refused on every request.
func TestTokenRefusesWhatTheProxyWouldRefuse(t *testing.T) {
	f := newTokenFixture(t)
	for _, key := range []string{"authentication.kubernetes.io/node-name", "Authentication.Kubernetes.io/Credential-ID", "x.k8s.io/team"} {
		issued, err := f.source(true).Issue(context.Background(), &user.DefaultInfo{Name: "alice", Extra: map[string][]string{key: {"v"}}})
		if err == nil {
			t.Errorf("extra %s: issued a token=%v certificate=%v, want a refusal", key, issued.Token != "", issued.ClientCertificateData != "")
		}
	}
	if _, err := f.source(true).Issue(context.Background(), &user.DefaultInfo{Name: "alice",
		Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=upstream"}}}); err != nil {
		t.Errorf("the credential-id extra (replaced by the token's own): %v", err)
	}
}
