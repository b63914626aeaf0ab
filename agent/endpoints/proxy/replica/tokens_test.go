package replica

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/proxyconfig"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/secretca"
	"github.com/pinniped-kit/pinniped/agent/endpoints/proxy/tokenkeys"
)

// giveUID stamps a created Secret with a UID, as a real API server does:
// the token keys' Secret UID names the installation. Through the tracker,
// not a reactor: reactors cannot be added while the informers run.
func giveUID(t *testing.T, kube *fake.Clientset, name string) {
	t.Helper()
	gvr := corev1.SchemeGroupVersion.WithResource("secrets")
	obj, err := kube.Tracker().Get(gvr, "pinniped", name)
	if err != nil {
		t.Fatal(err)
	}
	s := obj.(*corev1.Secret).DeepCopy()
	s.UID = types.UID("uid-of-" + name)
	if err := kube.Tracker().Update(gvr, s, "pinniped"); err != nil {
		t.Fatal(err)
	}
}

// waitForSecret waits until this replica's informer has seen the Secret
// as it is now in the fake API server.
func waitForSecret(t *testing.T, p *Runtime, kube *fake.Clientset, name string) {
	t.Helper()
	want, err := kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), "pinniped", name)
	exists := err == nil
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got, err := p.secrets.Secrets("pinniped").Get(name)
		if (!exists && err != nil) || (exists && err == nil && sameData(got, want)) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the replica's informer did not see Secret %s", name)
}

func sameData(got *corev1.Secret, want runtime.Object) bool {
	w := want.(*corev1.Secret)
	if got.UID != w.UID || len(got.Data) != len(w.Data) {
		return false
	}
	for k, v := range w.Data {
		if string(got.Data[k]) != string(v) {
			return false
		}
	}
	return true
}

// TestProxyExchangeIssuesTokensOnceAKeySigns: the proxy's own exchange
// hands out certificates until the leader's first token key has been
// promoted, then tokens that this replica's proxy accepts; the admin's
// --proxy-credential=certificate keeps certificates; tokens stop verifying
// when the keys' Secret is deleted.
func TestProxyExchangeIssuesTokensOnceAKeySigns(t *testing.T) {
	for _, certificatesOnly := range []bool{false, true} {
		p, kube := newRuntime(t, nil)
		p.certificatesOnly = certificatesOnly
		ctx := context.Background()
		secrets := kube.CoreV1().Secrets("pinniped")
		if _, err := (&secretca.Store{Now: time.Now, Secrets: secrets, Name: proxyconfig.SignerSecret, CommonName: "signer",
			Lifetime: time.Hour, RenewBefore: time.Minute}).Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		keys := &tokenkeys.Store{Secrets: secrets, Name: proxyconfig.TokenKeySecret, Now: func() time.Time { return now }}
		if err := keys.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		giveUID(t, kube, proxyconfig.TokenKeySecret)
		waitForSecret(t, p, kube, proxyconfig.SignerSecret)
		waitForSecret(t, p, kube, proxyconfig.TokenKeySecret)
		alice := &user.DefaultInfo{Name: "alice", Groups: []string{"devs"}}

		p.sync(ctx)
		issued, err := p.signer.Issue(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if issued.Token != "" || issued.ClientCertificateData == "" {
			t.Fatalf("certificatesOnly=%v, before the first key signs: want a certificate", certificatesOnly)
		}

		now = now.Add(tokenkeys.DefaultPromoteAfter)
		if err := keys.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, p, kube, proxyconfig.TokenKeySecret)
		p.sync(ctx)
		issued, err = p.signer.Issue(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if certificatesOnly {
			if issued.Token != "" || issued.ClientCertificateData == "" {
				t.Fatal("--proxy-credential=certificate: want a certificate once keys sign")
			}
			continue
		}
		if issued.Token == "" || issued.ClientCertificateData != "" {
			t.Fatal("once a key signs: want a token and no certificate")
		}
		resp, ours, err := p.proxyTokens.AuthenticateProxyToken(issued.Token)
		if !ours || err != nil || resp.User.GetName() != "alice" {
			t.Fatalf("this replica's proxy refused its own token: ours=%v err=%v", ours, err)
		}

		// A key edited out (the data no longer parses) is revoked at once,
		// not kept as the last good keys.
		broken, err := secrets.Get(ctx, proxyconfig.TokenKeySecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		good := broken.DeepCopy()
		delete(broken.Data, tokenkeys.SigningKey)
		if _, err := secrets.Update(ctx, broken, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, p, kube, proxyconfig.TokenKeySecret)
		p.sync(ctx)
		if _, ours, err := p.proxyTokens.AuthenticateProxyToken(issued.Token); !ours || err == nil {
			t.Fatal("a token still verifies after its key was edited out of the Secret")
		}
		if issued, err := p.signer.Issue(ctx, alice); err != nil || issued.Token != "" {
			t.Fatalf("with unusable keys: want a certificate, got err %v token %v", err, issued != nil && issued.Token != "")
		}
		good.ResourceVersion = ""
		if _, err := secrets.Update(ctx, good, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, p, kube, proxyconfig.TokenKeySecret)
		p.sync(ctx)
		if _, _, err := p.proxyTokens.AuthenticateProxyToken(issued.Token); err != nil {
			t.Fatalf("the repaired Secret's key does not verify again: %v", err)
		}

		if err := secrets.Delete(ctx, proxyconfig.TokenKeySecret, deleteNow); err != nil {
			t.Fatal(err)
		}
		waitForSecret(t, p, kube, proxyconfig.TokenKeySecret)
		p.sync(ctx)
		if _, ours, err := p.proxyTokens.AuthenticateProxyToken(issued.Token); !ours || err == nil {
			t.Fatal("a token still verifies after its keys' Secret was deleted")
		}
		if issued, err := p.signer.Issue(ctx, alice); err != nil || issued.Token != "" {
			t.Fatalf("without keys: want a certificate, got err %v token %v", err, issued != nil && issued.Token != "")
		}
	}
}

var deleteNow = metav1.DeleteOptions{}
