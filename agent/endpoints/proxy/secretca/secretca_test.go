package secretca_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/secretca"
)

func TestCreateReuseRotate(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	now := time.Now()
	store := &secretca.Store{Secrets: kube.CoreV1().Secrets("ns"), Name: "signer", Labels: map[string]string{"a": "b"},
		CommonName: "test signer", Lifetime: 100 * 24 * time.Hour, RenewBefore: 10 * 24 * time.Hour, Now: func() time.Time { return now }}

	first, err := store.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := store.Ensure(ctx)
	if err != nil || string(again.CertPEM()) != string(first.CertPEM()) {
		t.Fatalf("a second Ensure must reuse the CA: %v", err)
	}
	secret, _ := kube.CoreV1().Secrets("ns").Get(ctx, "signer", metav1.GetOptions{})
	if secret.Labels["a"] != "b" || len(secret.Data[secretca.KeyKey]) == 0 {
		t.Fatalf("secret: %+v", secret)
	}

	// Close to expiry: a new CA, the old one still trusted.
	now = now.Add(95 * 24 * time.Hour)
	rotated, err := store.Ensure(ctx)
	if err != nil || string(rotated.CertPEM()) == string(first.CertPEM()) {
		t.Fatalf("no rotation: %v", err)
	}
	secret, _ = kube.CoreV1().Secrets("ns").Get(ctx, "signer", metav1.GetOptions{})
	_, trust, err := secretca.Parse(secret, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if n := countCerts(trust); n != 2 {
		t.Fatalf("trust bundle has %d certificates, want the new and the previous CA", n)
	}
	// Once the previous CA has expired it is no longer trusted.
	_, trust, _ = secretca.Parse(secret, func() time.Time { return now.Add(6 * 24 * time.Hour) })
	if n := countCerts(trust); n != 1 {
		t.Fatalf("expired previous CA still trusted (%d certificates)", n)
	}

	// A corrupt Secret is replaced, not fatal.
	secret.Data[secretca.KeyKey] = []byte("garbage")
	if _, err := kube.CoreV1().Secrets("ns").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Ensure(ctx); err != nil {
		t.Fatalf("corrupt secret not repaired: %v", err)
	}
}

func countCerts(bundle []byte) int {
	n := 0
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return n
		}
		if _, err := x509.ParseCertificate(block.Bytes); err == nil {
			n++
		}
	}
}
