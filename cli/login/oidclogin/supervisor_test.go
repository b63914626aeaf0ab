package oidclogin_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin/oidctest"
)

func supervisor(t *testing.T) *oidctest.Provider {
	p := oidctest.New(t)
	p.IDPs = []oidctest.IDP{{Name: "My LDAP", Type: "ldap", Flows: []string{config.UpstreamFlowPassword, config.UpstreamFlowBrowser}}}
	return p
}

var ldap = config.Upstream{Name: "My LDAP", Type: "ldap"}

func TestSupervisorDiscovery(t *testing.T) {
	prov := discover(t, supervisor(t))
	if !prov.IsSupervisor() || !prov.FormPost {
		t.Fatalf("a Supervisor not recognised: supervisor %v, form_post %v", prov.IsSupervisor(), prov.FormPost)
	}
	if discover(t, oidctest.New(t)).IsSupervisor() {
		t.Fatal("a plain issuer taken for a Supervisor")
	}
	flow, err := prov.ResolveUpstream(ctxT(t), ldap)
	if err != nil || flow != config.UpstreamFlowPassword {
		t.Fatalf("the provider's first flow: %q, %v", flow, err)
	}
	flow, err = prov.ResolveUpstream(ctxT(t), config.Upstream{})
	if err != nil || flow != config.UpstreamFlowBrowser {
		t.Fatalf("no name: no checks, browser: %q, %v", flow, err)
	}
}

func TestCLIPasswordLogin(t *testing.T) {
	p := supervisor(t)
	tokens, err := discover(t, p).CLIPasswordLogin(ctxT(t), ldap, 0, "bob", "bob-password")
	if err != nil || tokens.IDToken == "" {
		t.Fatalf("%v", err)
	}
	if p.LastIDP() != "My LDAP" {
		t.Fatalf("the authorize request named %q", p.LastIDP())
	}
	_, err = discover(t, p).CLIPasswordLogin(ctxT(t), ldap, 0, "bob", "nope")
	if !errors.Is(err, oidclogin.ErrPasswordRefused) || strings.Contains(err.Error(), "nope") {
		t.Fatalf("refused password: %v", err)
	}
}

// TestCLIPasswordLoginTrustsOnlyItsOwnAnswer: a code is taken only from a
// redirect to this login's callback carrying this login's state.
func TestCLIPasswordLoginTrustsOnlyItsOwnAnswer(t *testing.T) {
	for name, tamper := range map[string]func(w http.ResponseWriter, u *url.URL) bool{
		"another host": func(_ http.ResponseWriter, u *url.URL) bool { u.Host = "evil.example:0"; return false },
		"https":        func(_ http.ResponseWriter, u *url.URL) bool { u.Scheme = "https"; return false },
		"another path": func(_ http.ResponseWriter, u *url.URL) bool { u.Path = "/elsewhere"; return false },
		"another state": func(_ http.ResponseWriter, u *url.URL) bool {
			q := u.Query()
			q.Set("state", "someone-elses")
			u.RawQuery = q.Encode()
			return false
		},
		"no redirect": func(w http.ResponseWriter, _ *url.URL) bool {
			_, _ = w.Write([]byte("<html>log in here</html>"))
			return true
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := supervisor(t)
			p.Tamper = tamper
			if _, err := discover(t, p).CLIPasswordLogin(ctxT(t), ldap, 0, "bob", "bob-password"); err == nil {
				t.Fatal("accepted")
			}
			if p.AuthCodeGrants.Load() != 0 {
				t.Fatal("the code was exchanged")
			}
		})
	}
}
