//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestClaimRules: a JWTAuthenticator with kube-apiserver's claim rules
// decides who Dex's users are on the real cluster: a username with a
// prefix, groups made by an expression over a nested claim (Dex's
// federated_claims), the UID from that nested claim (carried in the
// certificate to the API server), and a validation rule that turns a user
// away. A rule that does not compile says where in status; the upstream
// form (spec.claims) on the same tokens is unchanged.
func TestClaimRules(t *testing.T) {
	ctx := context.Background()
	cfg := Bed.Config()
	installAgent(t)
	ca, err := os.ReadFile(cfg.TestbedCAFile())
	if err != nil {
		t.Fatal(err)
	}
	applyClaimRules(t, ca, `
---
apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: dex-broken-rules}
spec:
  issuer: %[1]s
  audience: %[2]s
  tls: {certificateAuthorityData: %[3]s}
  claimMappings:
    username: {expression: 'claims.sub +'}
`+strings.NewReplacer("name: dex-rules", "name: dex-rules-no-uid", "    uid: {expression: 'claims.federated_claims.user_id'}\n", "").Replace(claimRulesYAML))
	t.Cleanup(func() {
		_, _ = RunE(nil, "kubectl", "delete", "jwtauthenticator", "dex-rules", "dex-broken-rules", "dex-rules-no-uid", "--ignore-not-found")
	})
	waitPhase(t, "jwtauthenticator", "dex-rules", "Ready")
	waitPhase(t, "jwtauthenticator", "dex-rules-no-uid", "Ready")
	waitPhase(t, "jwtauthenticator", "dex-broken-rules", "Error")
	// Which signer makes the certificate decides whether a UID can reach
	// the API server: the cluster signing key's certificates carry it,
	// kube-controller-manager's CSR signer drops it. Right after an
	// install the agent may still be on the CSR API.
	csr := cfg.Profile == testbed.ProfileManaged
	// (Reported as an error where anonymous requests reach only health
	// endpoints, but it signs for the authenticated exchange below.)
	want := map[bool]string{false: "KubeClusterSigningCertificate=Success:", true: "CertificateSigningRequest=Success:"}[csr]
	if cfg.AnonymousHealthOnly() {
		want = "CertificateSigningRequest=Error:ErrorDuringSetup"
	}
	Eventually(t, 2*time.Minute, "the CredentialIssuer reports "+want, func(context.Context) error {
		out, _ := RunE(nil, "kubectl", "get", "credentialissuers.config.concierge.pinniped.dev", "-o",
			`jsonpath={range .items[0].status.strategies[*]}{.type}={.status}:{.reason} {end}`)
		if !strings.Contains(out, want) {
			return errors.New(out)
		}
		return nil
	})
	idToken := func(u testbed.DexUser) string { return federatedIDToken(t, u) }
	alice, bob := testbed.DexUsers[0], testbed.DexUsers[1]

	t.Run("the rules decide the identity the cluster sees", func(t *testing.T) {
		authenticator, wantUID := "dex-rules", alice.UserID
		if csr {
			// Refused, not handed out without the UID.
			if cred := exchange(t, idToken(alice), "JWTAuthenticator", "dex-rules"); cred.Cert != "" {
				t.Fatal("the CSR signer's certificate was handed out without the UID the rules mapped")
			}
			// For that reason, not because a replica had not built the authenticator yet.
			waitAgentLog(t, "the agent refused for the UID", func(l map[string]any) bool {
				reason, _ := l["reason"].(string)
				return l["msg"] == "token exchange failed" && strings.Contains(reason, "cannot carry a UID")
			})
			authenticator, wantUID = "dex-rules-no-uid", ""
		}
		// On kubeadm a replica still on the CSR API refuses the UID the rules map.
		cred := exchangeUntilIssued(t, idToken(alice), "JWTAuthenticator", authenticator)
		who := whoamiWithCert(t, cred)
		want := []string{"system:authenticated"}
		for _, g := range alice.Groups {
			want = append(want, "local/"+g)
		}
		if who.Username != "rules:"+alice.Email || who.UID != wantUID || !sameSet(who.Groups, want) {
			t.Fatalf("the API server sees %+v; want rules:%s, uid %q, groups %v", who, alice.Email, wantUID, want)
		}
	})

	t.Run("through the impersonation proxy the mapped UID reaches the API server", func(t *testing.T) {
		if !csr {
			t.Skip("the kubeadm profile runs no impersonation proxy")
		}
		// The proxy's own credentials carry the UID (its token in a claim, its
		// certificate in the subject); it reads the UID back and asks the API
		// server as that user with Impersonate-Uid.
		s := waitProxyStrategy(t, "the impersonation proxy is advertised", proxySucceeds)
		caFile := filepath.Join(t.TempDir(), "proxy-ca.crt")
		if err := os.WriteFile(caFile, s.CA, 0o600); err != nil {
			t.Fatal(err)
		}
		in := ourInstall
		in.authenticator = "dex-rules"
		creds := map[string]proxyCredential{"the proxy's token": {Token: in.waitProxyToken(t, s, idToken(alice))}}
		creds["a certificate from the proxy's signer"] = signerCredential(t, ourInstall, "rules:"+alice.Email, alice.UserID, []string{"local/developers"})
		for name, cred := range creds {
			if who := whoamiWithProxyCredential(t, cred, s.Endpoint, caFile); who.Username != "rules:"+alice.Email || who.UID != alice.UserID {
				t.Errorf("%s: through the proxy the API server sees %+v; want rules:%s with uid %q", name, who, alice.Email, alice.UserID)
			}
		}
	})

	t.Run("a validation rule turns a user away", func(t *testing.T) {
		if cred := exchange(t, idToken(bob), "JWTAuthenticator", "dex-rules"); cred.Message != "authentication failed" || cred.Cert != "" {
			t.Fatalf("bob (a viewer) got %+v", cred)
		}
	})

	t.Run("a rule that does not compile is named in status", func(t *testing.T) {
		out := Kubectl(t, "get", "jwtauthenticator", "dex-broken-rules", "-o",
			`jsonpath={range .status.conditions[*]}{.type}={.status}: {.message}{"\n"}{end}`)
		if !strings.Contains(out, "ClaimRulesValid=False: spec.claimMappings.username.expression") || !strings.Contains(out, "Ready=False") {
			t.Fatalf("conditions:\n%s", out)
		}
		if cred := exchange(t, idToken(alice), "JWTAuthenticator", "dex-broken-rules"); cred.Cert != "" {
			t.Fatal("a broken authenticator issued a credential")
		}
	})

	t.Run("the API server refuses both forms at once", func(t *testing.T) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "authentication.concierge.pinniped.dev/v1alpha1", "kind": "JWTAuthenticator",
			"metadata": map[string]any{"name": "dex-both"},
			"spec": map[string]any{
				"issuer": cfg.DexIssuer(), "audience": "x",
				"claims":        map[string]any{"username": "email"},
				"claimMappings": map[string]any{"username": map[string]any{"claim": "email", "prefix": ""}},
			},
		}}
		dyn := dynamic.NewForConfigOrDie(RESTConfig(t))
		gvr := schema.GroupVersionResource{Group: "authentication.concierge.pinniped.dev", Version: "v1alpha1", Resource: "jwtauthenticators"}
		_, err := dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "not both") {
			t.Fatalf("created, or refused for another reason: %v", err)
		}
	})

	t.Run("upstream's form is unchanged", func(t *testing.T) {
		// installAgent's authenticator: spec.claims.username email, groups by default.
		who := whoamiWithCert(t, exchange(t, idToken(alice), "JWTAuthenticator", "dex"))
		if who.Username != alice.Email || who.UID != "" || !sameSet(who.Groups, append(slices.Clone(alice.Groups), "system:authenticated")) {
			t.Fatalf("the API server sees %+v", who)
		}
	})
}

// applyClaimRules applies the JWTAuthenticator dex-rules (and more, a YAML
// tail with the same %[1]s issuer, %[2]s audience and %[3]s CA): Dex's
// users by email with a prefix, groups made from the nested
// federated_claims, the UID from it, viewers turned away.
func applyClaimRules(t *testing.T, ca []byte, more string) {
	t.Helper()
	applyYAML(t, fmt.Sprintf(claimRulesYAML+more, Bed.Config().DexIssuer(), testbed.DexClientID, base64.StdEncoding.EncodeToString(ca)))
}

// claimRulesYAML is the JWTAuthenticator dex-rules.
const claimRulesYAML = `
---
apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: dex-rules}
spec:
  issuer: %[1]s
  audience: %[2]s
  tls: {certificateAuthorityData: %[3]s}
  claimMappings:
    username: {claim: email, prefix: "rules:"}
    groups: {expression: 'dyn(claims.groups).map(g, claims.federated_claims.connector_id + "/" + g)'}
    uid: {expression: 'claims.federated_claims.user_id'}
  claimValidationRules:
  - expression: '!("viewers" in claims.groups)'
    message: viewers may not use this cluster
`

// federatedIDToken is u's Dex ID token with the nested federated_claims
// (scope federated:id).
func federatedIDToken(t *testing.T, u testbed.DexUser) string {
	t.Helper()
	ctx := context.Background()
	_, conf := DexOAuth2(t, ctx, "")
	conf.Scopes = append(conf.Scopes, "federated:id")
	tok, err := conf.PasswordCredentialsToken(DexContext(t, ctx), u.Email, u.Password)
	if err != nil {
		t.Fatalf("password grant for %s: %v", u.Email, err)
	}
	return tok.Extra("id_token").(string)
}

// sameSet: a certificate's groups come back sorted (DER sorts a SET OF).
func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
