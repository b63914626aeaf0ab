package clustercred

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	"github.com/pinniped-kit/pinniped/agent/apis/credentialttl"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/credentials/certauthority"
)

// MinCSRTTL is the shortest lifetime the certificates API accepts
// (spec.expirationSeconds must be at least 600).
const MinCSRTTL = credentialttl.MinCSR

// CSRLabel marks the agent's CertificateSigningRequests so uninstall and
// admins can find them.
const CSRLabel = "pinniped.dev/credential-request"

// CSR has the cluster sign client certificates through the certificates.k8s.io
// API with the kubernetes.io/kube-apiserver-client signer. It needs no
// access to the signing key, only RBAC to create, approve, watch and delete
// CertificateSigningRequests and to approve for that one signer (see
// install/ for the exact rules). The private key never leaves the agent.
type CSR struct {
	Client kubernetes.Interface
	// TTL is raised to MinCSRTTL if shorter.
	TTL time.Duration
	// Timeout bounds waiting for the signer.
	Timeout time.Duration
}

const clientSigner = "kubernetes.io/kube-apiserver-client"

// Issue implements Source.
func (c *CSR) Issue(ctx context.Context, u user.Info) (*Credential, error) {
	if err := certificateCarries(u); err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	certPEM, err := c.sign(ctx, u, key)
	if err != nil {
		return nil, err
	}
	cert, err := checkSigned(certPEM, u)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Credential{ClusterCredential: &loginv1alpha1.ClusterCredential{
		ExpirationTimestamp:   metaTime(cert.NotAfter),
		ClientCertificateData: string(certPEM),
		ClientKeyData:         string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
	}}, nil
}

// sign has the cluster sign a certificate for u's key: a
// CertificateSigningRequest created, approved by the agent, and deleted
// once the signer has answered.
func (c *CSR) sign(ctx context.Context, u user.Info, key *ecdsa.PrivateKey) ([]byte, error) {
	reqDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: certauthority.ClientSubject(u.GetName(), u.GetUID(), u.GetGroups()),
	}, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate request: %w", err)
	}
	seconds := int32(min(max(c.TTL, MinCSRTTL), credentialttl.Max) / time.Second) //nolint:gosec // capped at a day, fits in int32
	csrs := c.Client.CertificatesV1().CertificateSigningRequests()
	created, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pinniped-", Labels: map[string]string{CSRLabel: "true"}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: reqDER}),
			SignerName:        clientSigner,
			ExpirationSeconds: &seconds,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create CertificateSigningRequest: %w", err)
	}
	// The CSR holds no secret, but there is no reason to keep it around.
	defer func() {
		_ = csrs.Delete(context.WithoutCancel(ctx), created.Name, metav1.DeleteOptions{})
	}()

	created.Status.Conditions = append(created.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "PinnipedTokenCredentialRequest", Message: "approved by pinniped-agent after authenticating the user's token",
	})
	if _, err := csrs.UpdateApproval(ctx, created.Name, created, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("approve CertificateSigningRequest %s: %w", created.Name, err)
	}
	return waitForCertificate(ctx, c.Client, created.Name)
}

// checkSigned parses the signed certificate and refuses one that is not
// u's. A signer may rewrite the subject: kube-controller-manager's rebuilds
// it from the request's known attributes and so drops a UID. A certificate
// that names someone else, or drops the UID, is refused rather than handed
// out as this user. (Groups come back sorted: DER sorts a SET OF.)
func checkSigned(certPEM []byte, u user.Info) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, errors.New("signer returned no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse signed certificate: %w", err)
	}
	seen, ok, err := x509request.CommonNameUserConversion.User([]*x509.Certificate{cert})
	switch {
	case err != nil || !ok || seen.User.GetName() != u.GetName() || !sameSet(seen.User.GetGroups(), u.GetGroups()):
		return nil, fmt.Errorf("the signer %s changed the certificate's subject: the cluster would not see this user as authenticated", clientSigner)
	case seen.User.GetUID() != u.GetUID():
		return nil, fmt.Errorf("the signer %s cannot carry a UID in certificates, and the authenticator maps one (claimMappings.uid): "+
			"remove it, or log in through the impersonation proxy, whose certificates carry it", clientSigner)
	}
	return cert, nil
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func waitForCertificate(ctx context.Context, client kubernetes.Interface, name string) ([]byte, error) {
	csrs := client.CertificatesV1().CertificateSigningRequests()
	w, err := csrs.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, fmt.Errorf("watch CertificateSigningRequest %s: %w", name, err)
	}
	defer w.Stop()
	// The certificate may have been issued before the watch started.
	if got, err := csrs.Get(ctx, name, metav1.GetOptions{}); err == nil {
		if cert, done, err := certificateOf(got); done {
			return cert, err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("CertificateSigningRequest %s was not signed in time (is kube-controller-manager's csrsigning controller running with a client signer?): %w", name, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, fmt.Errorf("watch of CertificateSigningRequest %s ended early", name)
			}
			if ev.Type == watch.Deleted {
				return nil, fmt.Errorf("CertificateSigningRequest %s was deleted before it was signed", name)
			}
			if got, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok {
				if cert, done, err := certificateOf(got); done {
					return cert, err
				}
			}
		}
	}
}

func certificateOf(csr *certificatesv1.CertificateSigningRequest) (cert []byte, done bool, err error) {
	for _, c := range csr.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case certificatesv1.CertificateDenied:
			return nil, true, fmt.Errorf("CertificateSigningRequest %s was denied: %s", csr.Name, c.Message)
		case certificatesv1.CertificateFailed:
			return nil, true, fmt.Errorf("signing CertificateSigningRequest %s failed: %s", csr.Name, c.Message)
		}
	}
	if len(csr.Status.Certificate) > 0 {
		return csr.Status.Certificate, true, nil
	}
	return nil, false, nil
}
