// Package secretca keeps a certificate authority in a Secret, so every agent
// replica signs with and trusts the same CA. Before the CA expires a new one
// replaces it, and the old certificate stays trusted beside it for a while,
// so certificates issued just before the rotation keep working.
package secretca

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

// Keys of the Secret's data.
const (
	CertKey     = "ca.crt"
	KeyKey      = "ca.key"
	PreviousKey = "previous.crt"
)

// Store loads, creates and rotates one CA Secret.
type Store struct {
	Secrets    corev1client.SecretInterface
	Name       string
	Labels     map[string]string
	CommonName string
	// Lifetime of a new CA; RenewBefore is how long before its expiry it is
	// replaced.
	Lifetime, RenewBefore time.Duration
	// Now is the clock, required.
	Now func() time.Time
}

// Ensure returns the current CA, creating the Secret when it is missing and
// rotating the CA when it is close to expiry. Replicas may race: the API
// server lets exactly one create or update win, and the others read it.
func (s *Store) Ensure(ctx context.Context) (*certauthority.CA, error) {
	for attempt := 0; ; attempt++ {
		ca, err := s.ensureOnce(ctx)
		if err == nil || attempt == 2 || (!apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err)) {
			if err != nil {
				return nil, fmt.Errorf("CA Secret %s: %w", s.Name, err)
			}
			return ca, nil
		}
	}
}

func (s *Store) ensureOnce(ctx context.Context) (*certauthority.CA, error) {
	secret, err := s.Secrets.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ca, data, err := s.generate(nil)
		if err != nil {
			return nil, err
		}
		_, err = s.Secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: s.Labels},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}, metav1.CreateOptions{})
		return ca, err
	}
	if err != nil {
		return nil, err
	}
	ca, _, parseErr := Parse(secret, s.Now)
	if parseErr == nil && !s.Now().Add(s.RenewBefore).After(ca.Certificate().NotAfter) {
		return ca, nil
	}
	// Corrupt or about to expire: replace it, keeping the old certificate
	// trusted when there is one.
	var previous []byte
	if parseErr == nil {
		previous = ca.CertPEM()
	}
	fresh, data, err := s.generate(previous)
	if err != nil {
		return nil, err
	}
	secret.Data = data
	_, err = s.Secrets.Update(ctx, secret, metav1.UpdateOptions{})
	return fresh, err
}

func (s *Store) generate(previous []byte) (*certauthority.CA, map[string][]byte, error) {
	ca, err := certauthority.New(s.CommonName, s.Lifetime, s.Now)
	if err != nil {
		return nil, nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, nil, err
	}
	data := map[string][]byte{CertKey: ca.CertPEM(), KeyKey: key}
	if len(previous) > 0 {
		data[PreviousKey] = previous
	}
	return ca, data, nil
}

// Parse reads a CA Secret: the CA to sign with, and the PEM bundle to trust
// (the CA and, while it has not expired, the one it replaced).
func Parse(secret *corev1.Secret, now func() time.Time) (*certauthority.CA, []byte, error) {
	if secret == nil {
		return nil, nil, errors.New("no Secret")
	}
	ca, err := certauthority.Load(secret.Data[CertKey], secret.Data[KeyKey], now)
	if err != nil {
		return nil, nil, fmt.Errorf("the Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	trust := bytes.Clone(ca.CertPEM())
	if prev := secret.Data[PreviousKey]; len(prev) > 0 && stillValid(prev, now) {
		trust = append(trust, prev...)
	}
	return ca, trust, nil
}

func stillValid(certPEM []byte, now func() time.Time) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return false
	}
	t := time.Now()
	if now != nil {
		t = now()
	}
	return t.Before(cert.NotAfter)
}
