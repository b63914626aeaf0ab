package render_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/pinniped-kit/pinniped/install/render"
)

func keys(t *testing.T, c render.Config) map[string]render.Object {
	t.Helper()
	objs, err := render.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]render.Object{}
	for _, o := range objs {
		// The group is part of what an object is: a CredentialIssuer of
		// another group is another object.
		out[o.GetAPIVersion()+" "+o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return out
}

// TestTwoInstallsShareNoObject: an install with the default suffix in
// "pinniped" and one with another suffix in another namespace have no
// object in common (cluster-scoped, in kube-system or kube-public, or
// anywhere), so applying one never overwrites the other's.
func TestTwoInstallsShareNoObject(t *testing.T) {
	def := keys(t, render.Config{Image: "img", OIDCIssuer: "https://dex", OIDCAudience: "a", AuthenticatorName: "dex"})
	suf := keys(t, render.Config{Image: "img", Namespace: "pinniped-suffixed", GroupSuffix: "e2e-suffix.example.net",
		OIDCIssuer: "https://dex", OIDCAudience: "a", AuthenticatorName: "dex"})
	if len(def) != len(suf) {
		t.Errorf("%d objects by default, %d under a suffix", len(def), len(suf))
	}
	for k := range suf {
		if _, shared := def[k]; shared {
			t.Errorf("both installs render %s", k)
		}
		if strings.Contains(k, "concierge.pinniped.dev") {
			t.Errorf("the suffixed install renders %s", k)
		}
	}
	for k, o := range suf {
		if strings.Contains(string(mustJSON(t, o)), ".concierge.pinniped.dev") {
			t.Errorf("%s still names a default group", k)
		}
	}
}

// TestInstallSelector: each install's uninstall selects all of its own
// objects and none of the other's; the default one also selects objects
// of installs from before suffixes (which have no suffix label).
func TestInstallSelector(t *testing.T) {
	def := keys(t, render.Config{Image: "img"})
	suf := keys(t, render.Config{Image: "img", Namespace: "pinniped-suffixed", GroupSuffix: "e2e-suffix.example.net"})
	long := strings.Repeat("a", 80) + ".example.com"
	longObjs := keys(t, render.Config{Image: "img", Namespace: "pinniped-long", GroupSuffix: long})
	selDefault, err := labels.Parse(render.InstallSelector(""))
	if err != nil {
		t.Fatal(err)
	}
	if render.InstallSelector("pinniped.dev") != render.InstallSelector("") {
		t.Error("the default suffix spelled out selects differently")
	}
	for name, c := range map[string]struct {
		own    map[string]render.Object
		suffix string
	}{"default": {def, ""}, "suffixed": {suf, "e2e-suffix.example.net"}, "long suffix": {longObjs, long}} {
		sel, err := labels.Parse(render.InstallSelector(c.suffix))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, other := range []map[string]render.Object{def, suf, longObjs} {
			for k, o := range other {
				own := sameMap(other, c.own)
				if got := sel.Matches(labels.Set(o.GetLabels())); got != own {
					t.Errorf("%s install's selector %q on %s: %v", name, sel, k, got)
				}
			}
		}
	}
	// What an install from before suffixes made: no suffix label.
	old := labels.Set{render.PartOfLabel: render.PartOfValue}
	if !selDefault.Matches(old) {
		t.Error("the default uninstall misses objects of an install from before suffixes")
	}
	if v := render.SuffixLabelValue(long); len(v) > 63 || v == render.SuffixLabelValue(long+"x") {
		t.Errorf("label value %q for a long suffix", v)
	}
}

func sameMap(a, b map[string]render.Object) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func mustJSON(t *testing.T, o render.Object) []byte {
	t.Helper()
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
