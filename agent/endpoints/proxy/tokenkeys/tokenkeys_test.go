package tokenkeys_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/tokenkeys"
)

const (
	ns   = "pinniped"
	name = "pinniped-agent-proxy-token-keys"
	uid  = types.UID("3f0c9a52-7d55-4c1e-9a57-0d8b8f1e2c11")
)

type bed struct {
	t     *testing.T
	kube  *fake.Clientset
	now   time.Time
	store *tokenkeys.Store
}

// newBed is a fake API server that, like a real one, gives a created Secret
// a UID, and a leader's Store on it with a fake clock.
func newBed(t *testing.T) *bed {
	b := &bed{t: t, kube: fake.NewClientset(), now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	b.kube.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*corev1.Secret).UID = uid
		return false, nil, nil
	})
	b.store = &tokenkeys.Store{
		Secrets: b.kube.CoreV1().Secrets(ns), Name: name, Labels: map[string]string{"app": "pinniped-agent"},
		RotateAfter: 30 * 24 * time.Hour, PromoteAfter: 5 * time.Minute,
		Retain: func() time.Duration { return 6 * time.Minute },
		Now:    func() time.Time { return b.now },
	}
	return b
}

func (b *bed) ensure() {
	b.t.Helper()
	if err := b.store.Ensure(context.Background()); err != nil {
		b.t.Fatal(err)
	}
}

// start creates the Secret and promotes its first key: an installation as
// it is a PromoteAfter after its first Ensure.
func (b *bed) start() {
	b.t.Helper()
	b.ensure()
	promote := b.store.PromoteAfter
	if promote == 0 {
		promote = tokenkeys.DefaultPromoteAfter
	}
	b.now = b.now.Add(promote)
	b.ensure()
}

func (b *bed) secret() *corev1.Secret {
	b.t.Helper()
	s, err := b.kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// parse is what a replica does with the Secret it watches.
func (b *bed) parse() *proxytoken.KeySet {
	b.t.Helper()
	ks, id, err := tokenkeys.Parse(b.secret(), b.now)
	if err != nil {
		b.t.Fatal(err)
	}
	if id != string(uid) {
		b.t.Fatalf("installID %q, want the Secret's UID", id)
	}
	return ks
}

func (b *bed) writes() int {
	n := 0
	for _, a := range b.kube.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

// ensureWritesNothing: Ensure with nothing due leaves the Secret alone.
func (b *bed) ensureWritesNothing(when string) {
	b.t.Helper()
	before := b.writes()
	b.ensure()
	if n := b.writes() - before; n != 0 {
		b.t.Fatalf("%s: Ensure wrote %d times with nothing due", when, n)
	}
}

func ids(ks *proxytoken.KeySet) []string {
	var out []string
	for id := range ks.Verify {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string { slices.Sort(s); return s }

var aud = proxytoken.ForInstall(string(uid))

func (b *bed) sign(ks *proxytoken.KeySet) string {
	b.t.Helper()
	tok, _, _, err := proxytoken.Sign(ks.Signing, aud, &user.DefaultInfo{Name: "alice"}, time.Hour, b.now)
	if err != nil {
		b.t.Fatal(err)
	}
	return tok
}

func (b *bed) verifies(ks *proxytoken.KeySet, tok string) bool {
	_, _, err := proxytoken.Verify(ks, aud, tok, b.now)
	return err == nil
}

func TestRotation(t *testing.T) {
	b := newBed(t)

	// 1. Create: the first key only verifies until every replica has seen
	// it, so no token can reach a replica that does not know its key yet.
	b.ensure()
	s := b.secret()
	if s.Labels["app"] != "pinniped-agent" || s.Type != corev1.SecretTypeOpaque {
		t.Fatalf("created %s with labels %v type %s", s.Name, s.Labels, s.Type)
	}
	created := b.parse()
	if created.Signing != nil || len(created.Verify) != 1 {
		t.Fatalf("just created: signing key %v, %d verify keys; want none and the first key", created.Signing != nil, len(created.Verify))
	}
	b.ensureWritesNothing("just created")
	b.now = b.now.Add(5*time.Minute - time.Second)
	b.ensureWritesNothing("first key not yet due to sign")
	b.now = b.now.Add(time.Second)
	b.ensure()
	first := b.parse()
	a := first.Signing.ID
	if !slices.Equal(ids(first), ids(created)) {
		t.Fatalf("verify keys %v, want the first key only", ids(first))
	}
	if _, ok := b.secret().Data[tokenkeys.PreviousPub]; ok {
		t.Fatal("the first promotion recorded a previous key")
	}
	b.ensureWritesNothing("first key promoted")
	b.now = b.now.Add(30*24*time.Hour - time.Second)
	b.ensureWritesNothing("signing key not yet due to rotate")

	// 2. Add next: verified with, not signed with.
	b.now = b.now.Add(time.Second)
	b.ensure()
	before := b.parse()
	if before.Signing.ID != a || len(before.Verify) != 2 {
		t.Fatalf("after adding next: signing %v, verify %v", before.Signing.ID == a, ids(before))
	}
	var next string
	for _, id := range ids(before) {
		if id != a {
			next = id
		}
	}
	b.ensureWritesNothing("next just added")
	b.now = b.now.Add(5*time.Minute - time.Second)
	b.ensureWritesNothing("next not yet due to sign")
	b.now = b.now.Add(time.Second)
	signedBefore := b.sign(before)

	// 3. Promote: next signs, the old key still verifies.
	b.ensure()
	after := b.parse()
	if after.Signing.ID != next || !slices.Equal(ids(after), sorted(a, next)) {
		t.Fatalf("after promotion: signing is next %v, verify %v", after.Signing.ID == next, ids(after))
	}
	if _, ok := b.secret().Data[tokenkeys.NextKey]; ok {
		t.Fatal("next key still present after promotion")
	}
	if !b.verifies(after, signedBefore) {
		t.Fatal("a token signed just before the promotion no longer verifies")
	}
	// A replica that has not seen the promotion yet verifies new tokens.
	signedAfter := b.sign(after)
	if !b.verifies(before, signedAfter) {
		t.Fatal("a token signed just after the promotion fails at a replica still on the keys before it")
	}
	b.ensureWritesNothing("just promoted")

	// 4. Retain, then drop the previous key.
	b.now = b.now.Add(6 * time.Minute)
	b.ensureWritesNothing("previous key within Retain")
	if !b.verifies(b.parse(), signedBefore) {
		t.Fatal("previous key dropped before Retain")
	}
	b.now = b.now.Add(time.Second)
	b.ensure()
	dropped := b.parse()
	if !slices.Equal(ids(dropped), []string{next}) {
		t.Fatalf("after Retain: verify %v, want the signing key only", ids(dropped))
	}
	if b.verifies(dropped, signedBefore) {
		t.Fatal("a token of the dropped key still verifies")
	}
	if !b.verifies(dropped, signedAfter) {
		t.Fatal("a token of the signing key fails")
	}
	b.ensureWritesNothing("previous dropped")
	if b.secret().UID != uid {
		t.Fatal("rotation changed the Secret's UID")
	}
}

// TestPromotionWaitsForPrevious: a promotion never overwrites a previous key
// whose tokens may still be live; it waits for Retain.
func TestPromotionWaitsForPrevious(t *testing.T) {
	b := newBed(t)
	b.store.RotateAfter = time.Minute
	b.store.Retain = func() time.Duration { return time.Hour }
	b.start()
	for range 3 { // add next, promote, add next
		b.now = b.now.Add(5 * time.Minute)
		b.ensure()
	}
	if len(b.parse().Verify) != 3 {
		t.Fatalf("verify keys %d, want signing, next and previous", len(b.parse().Verify))
	}
	b.now = b.now.Add(50 * time.Minute)
	b.ensureWritesNothing("next due but previous retained")
	b.now = b.now.Add(10 * time.Minute)
	b.ensure() // drops previous
	b.ensure() // promotes
	if s := b.secret(); len(s.Data[tokenkeys.NextKey]) != 0 || len(s.Data[tokenkeys.PreviousPub]) == 0 {
		t.Fatal("next not promoted once the previous key was dropped")
	}
}

// TestParseBoundsPrevious: a previous key the leader failed to drop stops
// verifying once no token it signed can be alive.
func TestParseBoundsPrevious(t *testing.T) {
	b := newBed(t)
	b.store.RotateAfter = time.Minute
	b.store.Retain = func() time.Duration { return 1000 * time.Hour }
	b.start()
	b.now = b.now.Add(time.Hour)
	b.ensure() // next
	b.now = b.now.Add(time.Hour)
	b.ensure() // promote
	retired := b.now
	s := b.secret()
	for _, tc := range []struct {
		at   time.Time
		want int
	}{{retired.Add(tokenkeys.MaxPreviousAge), 2}, {retired.Add(tokenkeys.MaxPreviousAge + time.Second), 1}} {
		ks, _, err := tokenkeys.Parse(s, tc.at)
		if err != nil || len(ks.Verify) != tc.want {
			t.Fatalf("at retired+%v: %v, %d keys, want %d", tc.at.Sub(retired), err, len(ks.Verify), tc.want)
		}
	}
}

func pemOf(t *testing.T, typ string, key any) []byte {
	t.Helper()
	var der []byte
	var err error
	if typ == "PUBLIC KEY" {
		der, err = x509.MarshalPKIXPublicKey(key)
	} else {
		der, err = x509.MarshalPKCS8PrivateKey(key)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestCorrupt(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key string
		edit      func(b *bed, d map[string][]byte)
	}{
		{"signing key garbage", tokenkeys.SigningKey, func(_ *bed, d map[string][]byte) { d[tokenkeys.SigningKey] = []byte("garbage") }},
		{"signing key missing", tokenkeys.SigningKey, func(_ *bed, d map[string][]byte) { delete(d, tokenkeys.SigningKey) }},
		{"signing key RSA", tokenkeys.SigningKey, func(b *bed, d map[string][]byte) { d[tokenkeys.SigningKey] = pemOf(b.t, "PRIVATE KEY", rsaKey) }},
		{"signing key P-384", tokenkeys.SigningKey, func(b *bed, d map[string][]byte) { d[tokenkeys.SigningKey] = pemOf(b.t, "PRIVATE KEY", p384) }},
		{"signing key a public key", tokenkeys.SigningKey, func(b *bed, d map[string][]byte) {
			d[tokenkeys.SigningKey] = pemOf(b.t, "PUBLIC KEY", &p384.PublicKey)
		}},
		{"signing key twice", tokenkeys.SigningKey, func(_ *bed, d map[string][]byte) {
			d[tokenkeys.SigningKey] = append(d[tokenkeys.SigningKey], d[tokenkeys.SigningKey]...)
		}},
		{"signing since garbage", tokenkeys.SigningSince, func(_ *bed, d map[string][]byte) { d[tokenkeys.SigningSince] = []byte("yesterday") }},
		{"next key without since", tokenkeys.NextSince, func(_ *bed, d map[string][]byte) { d[tokenkeys.NextKey] = d[tokenkeys.SigningKey] }},
		{"next since without key", tokenkeys.NextKey, func(_ *bed, d map[string][]byte) { d[tokenkeys.NextSince] = d[tokenkeys.SigningSince] }},
		{"previous garbage", tokenkeys.PreviousPub, func(_ *bed, d map[string][]byte) {
			d[tokenkeys.PreviousPub], d[tokenkeys.PreviousRetired] = []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), d[tokenkeys.SigningSince]
		}},
		{"previous without retired", tokenkeys.PreviousRetired, func(b *bed, d map[string][]byte) {
			d[tokenkeys.PreviousPub] = pemOf(b.t, "PUBLIC KEY", &p256.PublicKey)
		}},
		{"previous RSA", tokenkeys.PreviousPub, func(b *bed, d map[string][]byte) {
			d[tokenkeys.PreviousPub], d[tokenkeys.PreviousRetired] = pemOf(b.t, "PUBLIC KEY", &rsaKey.PublicKey), d[tokenkeys.SigningSince]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t)
			b.start()
			s := b.secret()
			keyPEM := string(s.Data[tokenkeys.SigningKey])
			tc.edit(b, s.Data)
			if _, err := b.kube.CoreV1().Secrets(ns).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			_, _, err := tokenkeys.Parse(s, b.now)
			if err == nil {
				t.Fatal("Parse accepted a corrupt Secret")
			}
			for _, want := range []string{ns + "/" + name, tc.key, "delete it"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "BEGIN") || strings.Contains(err.Error(), keyPEM[30:60]) {
				t.Errorf("error %q quotes the Secret's data", err)
			}
			// The leader reports it rather than replacing every key.
			before := b.writes()
			if err := b.store.Ensure(context.Background()); err == nil || !strings.Contains(err.Error(), "delete it") {
				t.Fatalf("Ensure on a corrupt Secret: %v", err)
			}
			if b.writes() != before {
				t.Fatal("Ensure rewrote a corrupt Secret")
			}
		})
	}
	t.Run("no UID", func(t *testing.T) {
		b := newBed(t)
		b.start()
		s := b.secret()
		s.UID = ""
		if _, _, err := tokenkeys.Parse(s, b.now); err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("Parse without a UID: %v", err)
		}
	})
	if _, _, err := tokenkeys.Parse(nil, time.Now()); err == nil {
		t.Fatal("Parse(nil) accepted")
	}
}

// TestConflictRetries: a leader that loses a race to another writer reads the
// Secret again and takes the step that is still due.
func TestConflictRetries(t *testing.T) {
	b := newBed(t)
	b.start()
	conflicts := 1
	b.kube.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, name, nil)
		}
		return false, nil, nil
	})
	b.now = b.now.Add(31 * 24 * time.Hour)
	b.ensure()
	if len(b.parse().Verify) != 2 {
		t.Fatal("next key not added after a conflict")
	}
}

// TestDefaults: a zero Store rotates after 30 days and promotes after
// DefaultPromoteAfter.
func TestDefaults(t *testing.T) {
	b := newBed(t)
	b.store.RotateAfter, b.store.PromoteAfter, b.store.Retain = 0, 0, nil
	b.start()
	b.now = b.now.Add(tokenkeys.DefaultRotateAfter - time.Second)
	b.ensureWritesNothing("before the default rotation")
	b.now = b.now.Add(time.Second)
	b.ensure()
	b.now = b.now.Add(tokenkeys.DefaultPromoteAfter - time.Second)
	b.ensureWritesNothing("before the default promotion")
	b.now = b.now.Add(time.Second)
	b.ensure()
	if len(b.secret().Data[tokenkeys.PreviousPub]) == 0 {
		t.Fatal("not promoted after the default delay")
	}
}

// TestDueIsWhenEnsureStepsNext: at every stage of a rotation, Ensure does
// nothing a second before Due and takes its step just after, so a leader
// woken then never waits for a later probe.
func TestDueIsWhenEnsureStepsNext(t *testing.T) {
	b := newBed(t)
	b.ensure() // a next key only
	for stage := range 4 {
		before := b.secret()
		due, err := b.store.Due(before)
		if err != nil {
			t.Fatal(err)
		}
		b.now = due.Add(-time.Second)
		b.ensure()
		if !maps.EqualFunc(b.secret().Data, before.Data, bytes.Equal) {
			t.Fatalf("stage %d: Ensure stepped before Due", stage)
		}
		b.now = due.Add(time.Nanosecond)
		b.ensure()
		if maps.EqualFunc(b.secret().Data, before.Data, bytes.Equal) {
			t.Fatalf("stage %d: Ensure did not step at Due", stage)
		}
	}
}
