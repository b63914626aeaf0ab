package clustercred_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
	"github.com/pinniped-kit/pinniped/agent/credentials/clustercred"
)

// fakeSigner plays kube-controller-manager's csrsigning controller: it signs
// approved requests, or denies them if told to. The e2e tests use the real one.
// It opens its watch before returning, so no approval can slip past it.
func fakeSigner(ctx context.Context, t *testing.T, client kubernetes.Interface, ca *certauthority.CA, deny bool) {
	w, err := client.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go sign(ctx, t, client, w, ca, deny)
}

func sign(ctx context.Context, t *testing.T, client kubernetes.Interface, w watch.Interface, ca *certauthority.CA, deny bool) {
	defer w.Stop()
	keyPEM, _ := ca.KeyPEM()
	block, _ := pem.Decode(keyPEM)
	key, _ := x509.ParsePKCS8PrivateKey(block.Bytes)
	for ev := range w.ResultChan() {
		csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok || len(csr.Status.Certificate) > 0 || len(csr.Status.Conditions) != 1 {
			continue // only act once, right after approval
		}
		if deny {
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Message: "policy says no"})
		} else {
			rb, _ := pem.Decode(csr.Spec.Request)
			req, _ := x509.ParseCertificateRequest(rb.Bytes)
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: req.Subject,
				NotBefore: time.Now().Add(-5 * time.Minute), NotAfter: time.Now().Add(time.Duration(*csr.Spec.ExpirationSeconds) * time.Second),
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Certificate(), req.PublicKey, key.(crypto.Signer))
			if err != nil {
				t.Error(err)
				return
			}
			csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		}
		_, _ = client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	}
}

func TestCSRSource(t *testing.T) {
	ca, _ := certauthority.New("cluster", time.Hour, nil)
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fakeSigner(ctx, t, client, ca, false)

	iss := &clustercred.CSR{Client: client, TTL: time.Minute, Timeout: 5 * time.Second}
	cred, err := iss.Issue(ctx, &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(cred.ClientCertificateData))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "alice" || cert.Subject.Organization[0] != "devs" {
		t.Fatalf("subject %v", cert.Subject)
	}
	if ttl := time.Until(cert.NotAfter); ttl < clustercred.MinCSRTTL-time.Minute {
		t.Fatalf("TTL %v: a 1m request must be raised to the API's 10m minimum", ttl)
	}
	kb, _ := pem.Decode([]byte(cred.ClientKeyData))
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil || !key.(interface{ Public() crypto.PublicKey }).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(cert.PublicKey) {
		t.Fatal("returned key does not match the certificate")
	}
	list, _ := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Fatalf("%d CSRs left behind", len(list.Items))
	}
}

func TestCSRSourceDenied(t *testing.T) {
	ca, _ := certauthority.New("cluster", time.Hour, nil)
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fakeSigner(ctx, t, client, ca, true)
	_, err := (&clustercred.CSR{Client: client, Timeout: 5 * time.Second}).Issue(ctx, &user.DefaultInfo{Name: "alice"})
	if err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("want a denial, got %v", err)
	}
}

func TestCSRSourceTimesOutWithAHint(t *testing.T) {
	_, err := (&clustercred.CSR{Client: fake.NewClientset(), Timeout: 300 * time.Millisecond}).Issue(context.Background(), &user.DefaultInfo{Name: "alice"})
	if err == nil || !strings.Contains(err.Error(), "csrsigning") {
		t.Fatalf("want a timeout naming the signer controller, got %v", err)
	}
}

// The signer sorts groups (DER sorts a SET OF) and, as kube-controller-
// manager's does, rebuilds the subject from its known attributes, dropping
// a UID: the first is the same user, the second is refused, saying why.
func TestCSRSourceChecksTheSignedSubject(t *testing.T) {
	ca, _ := certauthority.New("cluster", time.Hour, nil)
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fakeSigner(ctx, t, client, ca, false)
	iss := &clustercred.CSR{Client: client, TTL: time.Minute, Timeout: 5 * time.Second}
	if _, err := iss.Issue(ctx, &user.DefaultInfo{Name: "alice", Groups: []string{"ops", "devs"}}); err != nil {
		t.Fatalf("groups in another order: %v", err)
	}
	_, err := iss.Issue(ctx, &user.DefaultInfo{Name: "alice", UID: "1001", Groups: []string{"devs"}})
	if err == nil || !strings.Contains(err.Error(), "cannot carry a UID") {
		t.Fatalf("a dropped UID: %v", err)
	}
}
