// Package tokenkeys keeps the keys of the impersonation proxy's bearer
// tokens (package proxytoken) in a Secret. The leader writes it; every
// replica parses it and signs and verifies with what it finds.
//
// A new key is first added as "next", which replicas verify with but do not
// sign with, and only promoted to signing key once every replica has had time
// to see it: a token signed right after a promotion must verify at whichever
// replica it reaches. The very first key starts so too: until it is promoted
// the proxy hands out certificates. The key it replaces stays, public half only, as
// "previous" until the tokens it signed have expired.
package tokenkeys

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxytoken"
)

// Keys of the Secret's data. Keys are PEM (PKCS#8 private, PKIX public),
// times RFC 3339.
const (
	SigningKey      = "signing.key"
	SigningSince    = "signing.since"
	NextKey         = "next.key"
	NextSince       = "next.since"
	PreviousPub     = "previous.pub"
	PreviousRetired = "previous.retired"
)

// Defaults of Store's durations.
const (
	DefaultRotateAfter = 30 * 24 * time.Hour
	// A replica's informer sees a Secret change within seconds; a minute
	// also covers a watch that broke and re-lists. It is also how long a
	// new installation hands out certificates before its first token.
	DefaultPromoteAfter = time.Minute
)

// MaxPreviousAge bounds how long after its retirement Parse still verifies
// with a previous key, whatever the Secret says: no token it signed lives
// longer than the longest credential lifetime (plus a minute of clock skew).
// The leader normally drops the key sooner (Store.Retain).
const MaxPreviousAge = credentialttl.Max + time.Minute

// Store creates and rotates the token keys. Only the leader uses it.
type Store struct {
	Secrets corev1client.SecretInterface
	Name    string
	Labels  map[string]string
	// RotateAfter is how long a key signs before a next one is added
	// (DefaultRotateAfter when zero).
	RotateAfter time.Duration
	// PromoteAfter is how long a next key is only verified with before it
	// signs (DefaultPromoteAfter when zero): longer than it takes every
	// replica to see the Secret change.
	PromoteAfter time.Duration
	// Retain is how long a retired key still verifies: the credential
	// lifetime and some skew. MaxPreviousAge when nil.
	Retain func() time.Duration
	// Now is the clock, required.
	Now func() time.Time
}

// Ensure takes at most one step towards the keys due now, writing the
// Secret only when a step is due:
//  1. no Secret: create it with a next key and no signing key;
//  2. a retired key kept longer than Retain: drop it;
//  3. a next key older than PromoteAfter (and no previous left): it signs,
//     and the old signing key, if any, is kept, public half only, as previous;
//  4. a signing key older than RotateAfter and no next: add a next key.
//
// Called periodically, it walks through a rotation one step at a time, so
// replicas see each step before the next. Leaders may race: the API server
// lets one create or update win, and the loser retries on what it wrote.
func (s *Store) Ensure(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := s.ensureOnce(ctx)
		if err == nil || attempt == 2 || (!apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err)) {
			if err != nil {
				return fmt.Errorf("proxy token key Secret %s: %w", s.Name, err)
			}
			return nil
		}
	}
}

func (s *Store) ensureOnce(ctx context.Context) error {
	now := s.Now()
	secret, err := s.Secrets.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key, err := encodePrivate()
		if err != nil {
			return err
		}
		_, err = s.Secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: s.Labels},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{NextKey: key, NextSince: stamp(now)},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	st, err := read(secret)
	if err != nil {
		// Not replaced: that would end every outstanding token, and a
		// corrupt Secret is a person's edit, which a person should see.
		return err
	}
	data := maps.Clone(secret.Data)
	switch {
	case st.previous != nil && now.After(st.retired.Add(s.retain())):
		delete(data, PreviousPub)
		delete(data, PreviousRetired)
	case st.next != nil && st.previous == nil && !now.Before(st.nextSince.Add(s.promoteAfter())):
		if st.signing != nil {
			pub, err := encodePublic(&st.signing.PublicKey)
			if err != nil {
				return err
			}
			data[PreviousPub], data[PreviousRetired] = pub, stamp(now)
		}
		data[SigningKey], data[SigningSince] = data[NextKey], stamp(now)
		delete(data, NextKey)
		delete(data, NextSince)
	case st.next == nil && st.signing != nil && !now.Before(st.signingSince.Add(s.rotateAfter())):
		key, err := encodePrivate()
		if err != nil {
			return err
		}
		data[NextKey], data[NextSince] = key, stamp(now)
	default:
		return nil
	}
	updated := secret.DeepCopy()
	updated.Data = data
	_, err = s.Secrets.Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// Due is when Ensure next has a step to take on the Secret as it is now: it
// takes it at the first call after Due. The leader's controller probes only
// every few minutes once all works, so the leader asks to be woken then: a
// first key would otherwise wait that long, not PromoteAfter, before the
// proxy hands out its first token.
func (s *Store) Due(secret *corev1.Secret) (time.Time, error) {
	st, err := read(secret)
	if err != nil {
		return time.Time{}, err
	}
	switch {
	case st.previous != nil:
		return st.retired.Add(s.retain()), nil
	case st.next != nil:
		return st.nextSince.Add(s.promoteAfter()), nil
	default:
		return st.signingSince.Add(s.rotateAfter()), nil
	}
}

func (s *Store) retain() time.Duration {
	if s.Retain != nil {
		return s.Retain()
	}
	return MaxPreviousAge
}

func (s *Store) rotateAfter() time.Duration {
	if s.RotateAfter > 0 {
		return s.RotateAfter
	}
	return DefaultRotateAfter
}

func (s *Store) promoteAfter() time.Duration {
	if s.PromoteAfter > 0 {
		return s.PromoteAfter
	}
	return DefaultPromoteAfter
}

// Parse reads the token keys from the Secret: the key to sign with (nil
// before the first promotion), and the keys to verify with (the signing key, the next one, and the previous one
// until MaxPreviousAge after its retirement). installID is the Secret's UID:
// unique to the installation and unchanged by key rotation.
func Parse(secret *corev1.Secret, now time.Time) (*proxytoken.KeySet, string, error) {
	if secret == nil {
		return nil, "", errors.New("no proxy token key Secret")
	}
	if secret.UID == "" {
		return nil, "", fmt.Errorf("the Secret %s/%s has no UID, which names the installation in proxy tokens", secret.Namespace, secret.Name)
	}
	st, err := read(secret)
	if err != nil {
		return nil, "", err
	}
	ks := &proxytoken.KeySet{Verify: map[string]*ecdsa.PublicKey{}}
	if st.signing != nil {
		signing, err := proxytoken.KeyFor(st.signing)
		if err != nil {
			return nil, "", corrupt(secret, SigningKey, err)
		}
		ks.Signing = signing
		ks.Verify[signing.ID] = &st.signing.PublicKey
	}
	if st.next != nil {
		if err := addVerify(ks, &st.next.PublicKey); err != nil {
			return nil, "", corrupt(secret, NextKey, err)
		}
	}
	if st.previous != nil && !now.After(st.retired.Add(MaxPreviousAge)) {
		if err := addVerify(ks, st.previous); err != nil {
			return nil, "", corrupt(secret, PreviousPub, err)
		}
	}
	return ks, string(secret.UID), nil
}

func addVerify(ks *proxytoken.KeySet, pub *ecdsa.PublicKey) error {
	id, err := proxytoken.KeyID(pub)
	if err != nil {
		return err
	}
	ks.Verify[id] = pub
	return nil
}

// state is the Secret's data, decoded.
type state struct {
	signing      *ecdsa.PrivateKey
	signingSince time.Time
	next         *ecdsa.PrivateKey
	nextSince    time.Time
	previous     *ecdsa.PublicKey
	retired      time.Time
}

func read(secret *corev1.Secret) (*state, error) {
	var st state
	var err error
	d := secret.Data
	if _, ok := d[SigningKey]; ok {
		if st.signing, err = decodePrivate(d[SigningKey]); err != nil {
			return nil, corrupt(secret, SigningKey, err)
		}
		if st.signingSince, err = decodeTime(d[SigningSince]); err != nil {
			return nil, corrupt(secret, SigningSince, err)
		}
	} else if _, ok := d[SigningSince]; ok {
		return nil, corrupt(secret, SigningKey, errors.New("missing"))
	}
	if _, ok := d[NextKey]; ok {
		if st.next, err = decodePrivate(d[NextKey]); err != nil {
			return nil, corrupt(secret, NextKey, err)
		}
		if st.nextSince, err = decodeTime(d[NextSince]); err != nil {
			return nil, corrupt(secret, NextSince, err)
		}
	} else if _, ok := d[NextSince]; ok {
		return nil, corrupt(secret, NextKey, errors.New("missing"))
	}
	if _, ok := d[PreviousPub]; ok {
		if st.previous, err = decodePublic(d[PreviousPub]); err != nil {
			return nil, corrupt(secret, PreviousPub, err)
		}
		if st.retired, err = decodeTime(d[PreviousRetired]); err != nil {
			return nil, corrupt(secret, PreviousRetired, err)
		}
	} else if _, ok := d[PreviousRetired]; ok {
		return nil, corrupt(secret, PreviousPub, errors.New("missing"))
	}
	if st.signing == nil && st.next == nil {
		return nil, corrupt(secret, NextKey, errors.New("neither a signing nor a next key"))
	}
	return &st, nil
}

// corrupt says which entry is wrong and what to do; never what it holds.
func corrupt(secret *corev1.Secret, key string, err error) error {
	return fmt.Errorf("the Secret %s/%s is corrupt (%s: %w): delete it and the leader creates new keys; "+
		"proxy tokens issued until then stop working and clients exchange their credentials again",
		secret.Namespace, secret.Name, key, err)
}

func encodePrivate() ([]byte, error) {
	k, err := proxytoken.NewKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		return nil, fmt.Errorf("encode a proxy token key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func encodePublic(pub *ecdsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode a proxy token public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func decodePrivate(b []byte) (*ecdsa.PrivateKey, error) {
	der, err := pemBlock(b, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, errors.New("not a PKCS#8 private key")
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an ECDSA key")
	}
	if _, err := proxytoken.KeyID(&ec.PublicKey); err != nil {
		return nil, err
	}
	return ec, nil
}

func decodePublic(b []byte) (*ecdsa.PublicKey, error) {
	der, err := pemBlock(b, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("not a PKIX public key")
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok {
		return nil, errors.New("not an ECDSA key")
	}
	if _, err := proxytoken.KeyID(ec); err != nil {
		return nil, err
	}
	return ec, nil
}

// pemBlock returns the one PEM block of type typ. Errors never quote the
// data: it may be a private key.
func pemBlock(b []byte, typ string) ([]byte, error) {
	if len(b) == 0 {
		return nil, errors.New("missing")
	}
	block, rest := pem.Decode(b)
	if block == nil {
		return nil, errors.New("not PEM")
	}
	if block.Type != typ {
		return nil, fmt.Errorf("a PEM block of type %q, want %q", block.Type, typ)
	}
	if more, _ := pem.Decode(rest); more != nil {
		return nil, errors.New("more than one PEM block")
	}
	return block.Bytes, nil
}

func decodeTime(b []byte) (time.Time, error) {
	if len(b) == 0 {
		return time.Time{}, errors.New("missing")
	}
	t, err := time.Parse(time.RFC3339, string(b))
	if err != nil {
		return time.Time{}, errors.New("not an RFC 3339 time")
	}
	return t, nil
}

func stamp(t time.Time) []byte { return []byte(t.UTC().Format(time.RFC3339)) }
