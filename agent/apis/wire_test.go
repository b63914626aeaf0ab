package apis_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		loginv1alpha1.AddToScheme, identityv1alpha1.AddToScheme,
		authv1alpha1.AddToScheme, configv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestGoldenRoundTrip decodes each fixture (written from upstream Pinniped's
// documented wire shapes) strictly into our Go types and encodes it again.
// Strict decoding fails on any field name we spell differently; the
// comparison fails on any field we drop or add.
func TestGoldenRoundTrip(t *testing.T) {
	scheme := newScheme(t)
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures found: %v", err)
	}
	seenKinds := map[schema.GroupVersionKind]bool{}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			gvk := schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind)
			obj, err := scheme.New(gvk)
			if err != nil {
				t.Fatalf("fixture kind %s is not registered: %v", gvk, err)
			}
			seenKinds[gvk] = true
			if err := yaml.UnmarshalStrict(raw, obj); err != nil {
				t.Fatalf("fixture does not decode strictly into %T: %v", obj, err)
			}
			out, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			want, err := yaml.YAMLToJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, want, out) {
				t.Errorf("round trip changed the object\nwant: %s\ngot:  %s", want, out)
			}
		})
	}
	// Every non-list kind of the wire contract must have a fixture.
	for gvk, typ := range scheme.AllKnownTypes() {
		ours := strings.HasPrefix(typ.PkgPath(), "github.com/pinniped-kit/pinniped/")
		if !ours || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if !seenKinds[gvk] {
			t.Errorf("no golden fixture for %s", gvk)
		}
	}
}

// jsonEqual compares two JSON documents, treating null like absent because
// apimachinery versions differ in whether they emit zero timestamps as null.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(dropNulls(x), dropNulls(y))
}

func dropNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			v[k] = dropNulls(e)
		}
		return v
	case []any:
		for i := range v {
			v[i] = dropNulls(v[i])
		}
		return v
	default:
		return v
	}
}

// TestDeepCopyIsDeep guards against stale generated code: a copy must not
// share maps or slices with the original.
func TestDeepCopyIsDeep(t *testing.T) {
	orig := &configv1alpha1.CredentialIssuer{
		Spec: configv1alpha1.CredentialIssuerSpec{ImpersonationProxy: &configv1alpha1.ImpersonationProxySpec{
			Service: configv1alpha1.ImpersonationProxyServiceSpec{Annotations: map[string]string{"a": "1"}},
		}},
		Status: configv1alpha1.CredentialIssuerStatus{Strategies: []configv1alpha1.CredentialIssuerStrategy{{Message: "m"}}},
	}
	cp := orig.DeepCopy()
	cp.Spec.ImpersonationProxy.Service.Annotations["a"] = "2"
	cp.Status.Strategies[0].Message = "changed"
	if orig.Spec.ImpersonationProxy.Service.Annotations["a"] != "1" || orig.Status.Strategies[0].Message != "m" {
		t.Fatal("DeepCopy shares memory with the original")
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(cp)
	if buf.Len() == 0 {
		t.Fatal("copy does not encode")
	}
}
