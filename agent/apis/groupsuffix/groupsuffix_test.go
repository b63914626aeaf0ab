package groupsuffix_test

import (
	"strings"
	"testing"

	authv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/authentication/v1alpha1"
	configv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/config/v1alpha1"
	"github.com/pinniped-kit/pinniped/agent/apis/groupsuffix"
	identityv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/identity/v1alpha1"
	loginv1alpha1 "github.com/pinniped-kit/pinniped/agent/apis/login/v1alpha1"
)

func TestNamesUnderTheDefault(t *testing.T) {
	for got, want := range map[string]string{
		groupsuffix.Group(groupsuffix.Login, ""):                         "login.concierge.pinniped.dev",
		groupsuffix.Group(groupsuffix.Identity, "pinniped.dev"):          "identity.concierge.pinniped.dev",
		groupsuffix.Group(groupsuffix.Authentication, ""):                "authentication.concierge.pinniped.dev",
		groupsuffix.GroupVersion(groupsuffix.Config, ""):                 "config.concierge.pinniped.dev/v1alpha1",
		groupsuffix.APIServiceName(groupsuffix.Login, ""):                "v1alpha1.login.concierge.pinniped.dev",
		strings.Join(groupsuffix.APIServiceNames(""), ","):               "v1alpha1.login.concierge.pinniped.dev,v1alpha1.identity.concierge.pinniped.dev",
		groupsuffix.OriginalUserExtra(""):                                "original-user-info.impersonation-proxy.concierge.pinniped.dev",
		groupsuffix.OrDefault(""):                                        "pinniped.dev",
		groupsuffix.APIServiceName(groupsuffix.Identity, "acme.example"): "v1alpha1.identity.concierge.acme.example",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

func TestNamesUnderASuffix(t *testing.T) {
	const s = "tuna.io"
	for got, want := range map[string]string{
		groupsuffix.Group(groupsuffix.Login, s):           "login.concierge.tuna.io",
		groupsuffix.Group(groupsuffix.Config, s):          "config.concierge.tuna.io",
		groupsuffix.GroupVersion(groupsuffix.Identity, s): "identity.concierge.tuna.io/v1alpha1",
		strings.Join(groupsuffix.APIServiceNames(s), ","): "v1alpha1.login.concierge.tuna.io,v1alpha1.identity.concierge.tuna.io",
		groupsuffix.OriginalUserExtra(s):                  "original-user-info.impersonation-proxy.concierge.tuna.io",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if groupsuffix.IsDefault(s) || !groupsuffix.IsDefault("") || !groupsuffix.IsDefault("pinniped.dev") {
		t.Error("IsDefault is wrong")
	}
}

func TestValidate(t *testing.T) {
	longest := strings.Repeat("a", 200) + ".com" // 204: the CRD name is 251
	for _, ok := range []string{"pinniped.dev", "tuna.io", "e2e-suffix.example.net", "a.b", "1.2.3", longest} {
		if err := groupsuffix.Validate(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"":                                "empty",
		"nodot":                           "must contain a dot",
		"Upper.Case":                      "not allowed",
		"under_score.io":                  "not allowed",
		"-lead.io":                        "starts or ends",
		"trail-.io":                       "starts or ends",
		"double..dot":                     "empty part",
		".leading.dot":                    "empty part",
		"trailing.dot.":                   "empty part",
		"has space.io":                    "not allowed",
		"slash/in.io":                     "not allowed",
		strings.Repeat("a", 210) + ".com": "too long",
		strings.Repeat("a", 260) + ".com": "longer than 253",
	} {
		err := groupsuffix.Validate(bad)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", bad, err, want)
		}
	}
}

// TestDefaultsAreTheGeneratedGroups: the API packages' GroupName constants
// (which controller-gen reads) are the rule's default spelling.
func TestDefaultsAreTheGeneratedGroups(t *testing.T) {
	for got, want := range map[string]string{
		groupsuffix.Group(groupsuffix.Login, ""):          loginv1alpha1.GroupName,
		groupsuffix.Group(groupsuffix.Identity, ""):       identityv1alpha1.GroupName,
		groupsuffix.Group(groupsuffix.Authentication, ""): authv1alpha1.GroupName,
		groupsuffix.Group(groupsuffix.Config, ""):         configv1alpha1.GroupName,
		groupsuffix.Version:                               loginv1alpha1.SchemeGroupVersion.Version,
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

// TestIsOriginalUserExtra: every install's original-user key is reserved,
// whatever its suffix or case; keys that merely look alike are not.
func TestIsOriginalUserExtra(t *testing.T) {
	for key, want := range map[string]bool{
		groupsuffix.OriginalUserExtra(""):                                true,
		groupsuffix.OriginalUserExtra("tuna.io"):                         true,
		"Original-User-Info.Impersonation-Proxy.Concierge.Other.Example": true,
		"original-user-info.impersonation-proxy.concierge":               false,
		"authentication.kubernetes.io/credential-id":                     false,
		"example.com/original-user-info.impersonation-proxy.concierge.x": false,
	} {
		if got := groupsuffix.IsOriginalUserExtra(key); got != want {
			t.Errorf("IsOriginalUserExtra(%q) = %v, want %v", key, got, want)
		}
	}
}
