package crds_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/install/crds"
)

// crdValidator applies a CRD's schema the way kube-apiserver does on create:
// structural defaulting, then OpenAPI validation, then CEL rules.
type crdValidator struct {
	structural *schema.Structural
	openapi    validation.SchemaValidator
	cel        *cel.Validator
}

func loadCRD(t *testing.T, kind string) *crdValidator {
	t.Helper()
	files, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, err := fs.ReadFile(crds.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			t.Fatalf("%s is not a valid CRD: %v", f, err)
		}
		if crd.Spec.Names.Kind != kind {
			continue
		}
		var internal apiext.CustomResourceValidation
		if err := apiextv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(crd.Spec.Versions[0].Schema, &internal, nil); err != nil {
			t.Fatal(err)
		}
		structural, err := schema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			t.Fatalf("%s: schema is not structural: %v", f, err)
		}
		openapi, _, err := validation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			t.Fatal(err)
		}
		return &crdValidator{
			structural: structural,
			openapi:    openapi,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}
	}
	t.Fatalf("no CRD for kind %s", kind)
	return nil
}

func (v *crdValidator) validate(t *testing.T, doc string) (map[string]any, field.ErrorList) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	structuraldefaulting.Default(obj, v.structural)
	errs := validation.ValidateCustomResource(nil, obj, v.openapi)
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return obj, append(errs, celErrs...)
}

func TestEveryCRDIsStructuralAndClusterScoped(t *testing.T) {
	files, _ := fs.Glob(crds.FS, "*.yaml")
	if len(files) != 3 {
		t.Fatalf("expected 3 CRDs (JWTAuthenticator, WebhookAuthenticator, CredentialIssuer), found %v", files)
	}
	for _, f := range files {
		raw, _ := fs.ReadFile(crds.FS, f)
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if crd.Spec.Scope != apiextv1.ClusterScoped {
			t.Errorf("%s: scope %s, upstream clients expect Cluster", f, crd.Spec.Scope)
		}
		if !strings.HasSuffix(crd.Spec.Group, ".concierge.pinniped.dev") {
			t.Errorf("%s: group %s is not wire-compatible with upstream", f, crd.Spec.Group)
		}
		loadCRD(t, crd.Spec.Names.Kind)
	}
}

func TestSchemaValidation(t *testing.T) {
	cases := []struct {
		name, kind, doc string
		wantErr         string // empty means the object must be accepted
	}{
		{
			name: "jwt ok", kind: "JWTAuthenticator",
			doc: `{apiVersion: authentication.concierge.pinniped.dev/v1alpha1, kind: JWTAuthenticator,
				spec: {issuer: "https://dex.example.com", audience: cluster-1, claims: {username: email}}}`,
		},
		{
			name: "jwt http issuer refused", kind: "JWTAuthenticator",
			doc:     `{spec: {issuer: "http://dex.example.com", audience: a}}`,
			wantErr: "spec.issuer",
		},
		{
			name: "jwt empty audience refused", kind: "JWTAuthenticator",
			doc:     `{spec: {issuer: "https://dex", audience: ""}}`,
			wantErr: "spec.audience",
		},
		{
			name: "jwt bad CA source kind", kind: "JWTAuthenticator",
			doc:     `{spec: {issuer: "https://dex", audience: a, tls: {certificateAuthorityDataSource: {kind: Pod, name: x, key: y}}}}`,
			wantErr: "spec.tls.certificateAuthorityDataSource.kind",
		},
		{
			name: "jwt both CA forms refused", kind: "JWTAuthenticator",
			doc:     `{spec: {issuer: "https://dex", audience: a, tls: {certificateAuthorityData: eA==, certificateAuthorityDataSource: {kind: Secret, name: x, key: y}}}}`,
			wantErr: "at most one of",
		},
		{
			name: "jwt allowedClockSkew at the cap", kind: "JWTAuthenticator",
			doc: `{spec: {issuer: "https://dex", audience: a, allowedClockSkew: 3m}}`,
		},
		{
			name: "jwt allowedClockSkew within", kind: "JWTAuthenticator",
			doc: `{spec: {issuer: "https://dex", audience: a, allowedClockSkew: 1m30s}}`,
		},
		{
			name: "jwt allowedClockSkew beyond the cap", kind: "JWTAuthenticator",
			doc:     `{spec: {issuer: "https://dex", audience: a, allowedClockSkew: 3m1s}}`,
			wantErr: "allowedClockSkew must be a duration from 0s to 3m",
		},
		{
			name: "jwt allowedClockSkew negative", kind: "JWTAuthenticator",
			doc:     `{spec: {issuer: "https://dex", audience: a, allowedClockSkew: -1s}}`,
			wantErr: "allowedClockSkew",
		},
		{
			name: "jwt allowedClockSkew not a duration", kind: "JWTAuthenticator",
			doc:     `{spec: {issuer: "https://dex", audience: a, allowedClockSkew: soon}}`,
			wantErr: "allowedClockSkew",
		},
		{
			name: "webhook http endpoint refused", kind: "WebhookAuthenticator",
			doc:     `{spec: {endpoint: "http://hook"}}`,
			wantErr: "spec.endpoint",
		},
		{
			name: "webhook ok", kind: "WebhookAuthenticator",
			doc: `{spec: {endpoint: "https://hook/authenticate", tls: {certificateAuthorityDataSource: {kind: ConfigMap, name: x, key: ca.crt}}}}`,
		},
		{
			name: "issuer mode enum", kind: "CredentialIssuer",
			doc:     `{spec: {impersonationProxy: {mode: sometimes}}}`,
			wantErr: "spec.impersonationProxy.mode",
		},
		{
			name: "issuer service type enum", kind: "CredentialIssuer",
			doc:     `{spec: {impersonationProxy: {mode: auto, service: {type: NodePort}}}}`,
			wantErr: "spec.impersonationProxy.service.type",
		},
		{
			name: "issuer None needs externalEndpoint", kind: "CredentialIssuer",
			doc:     `{spec: {impersonationProxy: {mode: enabled, service: {type: None}}}}`,
			wantErr: "externalEndpoint is required",
		},
		{
			name: "issuer None with externalEndpoint", kind: "CredentialIssuer",
			doc: `{spec: {impersonationProxy: {mode: enabled, service: {type: None}, externalEndpoint: "proxy.example.com"}}}`,
		},
		{
			name: "issuer frontend server must be https", kind: "CredentialIssuer",
			doc: `{spec: {}, status: {strategies: [{type: KubeClusterSigningCertificate, status: Success, reason: FetchedKey,
				message: ok, lastUpdateTime: "2026-11-22T10:00:00Z",
				frontend: {type: TokenCredentialRequestAPI, tokenCredentialRequestInfo: {server: "http://x", certificateAuthorityData: eA==}}}]}}`,
			wantErr: "tokenCredentialRequestInfo.server",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := loadCRD(t, tc.kind).validate(t, tc.doc)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Fatalf("valid object refused: %v", errs.ToAggregate())
			case tc.wantErr != "" && len(errs) == 0:
				t.Fatalf("invalid object accepted; wanted an error mentioning %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(errs.ToAggregate().Error(), tc.wantErr):
				t.Fatalf("error %q does not mention %q", errs.ToAggregate(), tc.wantErr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	obj, errs := loadCRD(t, "CredentialIssuer").validate(t, `{spec: {impersonationProxy: {mode: auto}}}`)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	svc := obj["spec"].(map[string]any)["impersonationProxy"].(map[string]any)["service"]
	if svc == nil || svc.(map[string]any)["type"] != "LoadBalancer" {
		t.Fatalf("service.type should default to LoadBalancer, got %v", svc)
	}
}
