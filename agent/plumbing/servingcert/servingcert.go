// Package servingcert keeps the agent's aggregated-API serving certificate:
// a CA and leaf stored in one Secret so every replica serves the same chain,
// and the CA published in the APIServices' caBundle so kube-apiserver
// trusts it.
package servingcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

const (
	caLifetime   = 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
	// renewBefore is how long before expiry a new pair is made.
	renewBefore = 90 * 24 * time.Hour
)

// APIServices is the aggregation layer's resource.
var APIServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// Manager loads or creates the serving Secret.
type Manager struct {
	Kube        kubernetes.Interface
	Dynamic     dynamic.Interface
	Namespace   string
	SecretName  string
	ServiceName string
	// APIServiceNames get the CA in spec.caBundle.
	APIServiceNames []string
	Now             func() time.Time
	// Log hears that an APIService is awaited; nil discards.
	Log *slog.Logger
	// Poll is how often a missing APIService is looked for again
	// (default 1 s).
	Poll time.Duration
}

// Ensure returns the serving certificate, creating or renewing the Secret
// when needed, and makes sure the APIServices trust its CA.
func (m *Manager) Ensure(ctx context.Context) (*tls.Certificate, []byte, error) {
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	secrets := m.Kube.CoreV1().Secrets(m.Namespace)
	s, err := secrets.Get(ctx, m.SecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s, err = m.create(ctx, now)
		if apierrors.IsAlreadyExists(err) { // another replica won the race
			s, err = secrets.Get(ctx, m.SecretName, metav1.GetOptions{})
		}
	case err == nil && needsRenewal(s, now()):
		var fresh *corev1.Secret
		fresh, err = m.generate(now)
		if err == nil {
			s.Data = fresh.Data
			s, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("serving certificate Secret %s/%s: %w", m.Namespace, m.SecretName, err)
	}
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, nil, fmt.Errorf("serving certificate Secret %s/%s is corrupt (delete it to regenerate): %w", m.Namespace, m.SecretName, err)
	}
	caPEM := s.Data["ca.crt"]
	if err := m.publishCA(ctx, caPEM); err != nil {
		return nil, nil, err
	}
	return &pair, caPEM, nil
}

func (m *Manager) create(ctx context.Context, now func() time.Time) (*corev1.Secret, error) {
	s, err := m.generate(now)
	if err != nil {
		return nil, err
	}
	return m.Kube.CoreV1().Secrets(m.Namespace).Create(ctx, s, metav1.CreateOptions{})
}

func (m *Manager) generate(now func() time.Time) (*corev1.Secret, error) {
	ca, err := certauthority.New("pinniped aggregated API CA", caLifetime, now)
	if err != nil {
		return nil, err
	}
	host := m.ServiceName + "." + m.Namespace + ".svc"
	leaf, err := ca.IssueServingCert(host, []string{host, host + ".cluster.local"}, nil, leafLifetime)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.SecretName, Namespace: m.Namespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "pinniped"}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       leaf.CertPEM,
			corev1.TLSPrivateKeyKey: leaf.KeyPEM,
			"ca.crt":                ca.CertPEM(),
		},
	}, nil
}

func needsRenewal(s *corev1.Secret, now time.Time) bool {
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if block == nil {
		return true
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	return err != nil || now.Add(renewBefore).After(cert.NotAfter)
}

// publishCA waits for APIServices that do not exist yet: whatever applies
// the manifests (the installer, kubectl apply, a GitOps tool) may create the
// Deployment first, and a replica that exited would only be restarted into
// the same race with a growing back-off.
func (m *Manager) publishCA(ctx context.Context, caPEM []byte) error {
	if len(caPEM) == 0 {
		return errors.New("serving Secret has no ca.crt")
	}
	patch := fmt.Appendf(nil, `{"spec":{"caBundle":%q}}`, base64.StdEncoding.EncodeToString(caPEM))
	poll := m.Poll
	if poll <= 0 {
		poll = time.Second
	}
	for _, name := range m.APIServiceNames {
		var told time.Time
		err := wait.PollUntilContextCancel(ctx, poll, true, func(ctx context.Context) (bool, error) {
			_, err := m.Dynamic.Resource(APIServices).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "pinniped-agent"})
			if !apierrors.IsNotFound(err) {
				return true, err
			}
			// Said again each minute: a replica that stays unready here
			// needs someone to act.
			if m.Log != nil && time.Since(told) >= time.Minute {
				m.Log.Warn("this replica waits for its APIService before it serves; if this persists, apply the install's manifests again (pinniped install), or check that --api-group-suffix matches the installed APIServices",
					"apiservice", name)
				told = time.Now()
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("publish CA to APIService %s: %w", name, err)
		}
	}
	return nil
}
