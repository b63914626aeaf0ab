package login_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin"
	"github.com/pinniped-kit/pinniped/cli/login/oidclogin/oidctest"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
)

var nonInteractive = &execcred.Request{APIVersion: execcred.V1, Interactive: false}

// supervisorHarness plays a Pinniped Supervisor with an LDAP provider
// (password first, as upstream lists it) and an OIDC one (browser only).
func supervisorHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.idp.IDPs = []oidctest.IDP{
		{Name: "My LDAP", Type: "ldap", Flows: []string{config.UpstreamFlowPassword, config.UpstreamFlowBrowser}},
		{Name: "okta", Type: "oidc", Flows: []string{config.UpstreamFlowBrowser}},
	}
	return h
}

func TestSupervisorPasswordFlowFromTheEnvironment(t *testing.T) {
	h := supervisorHarness(t)
	r := h.request(true)
	r.Upstream = config.Upstream{Name: "My LDAP", Type: "ldap"}
	r.Username, r.Password = "bob", "bob-password"
	// No terminal and no flow named: the provider's first flow, with the
	// environment's credentials; no browser.
	if err := h.engine(io.Discard).LoginOIDC(context.Background(), r, nonInteractive); err != nil {
		t.Fatal(err)
	}
	if h.idp.AuthCodeGrants.Load() != 1 || h.ui.opened.Load() != 0 || h.idp.LastIDP() != "My LDAP" {
		t.Fatalf("code grants %d, browsers %d, IDP %q", h.idp.AuthCodeGrants.Load(), h.ui.opened.Load(), h.idp.LastIDP())
	}
}

func TestSupervisorPasswordRefused(t *testing.T) {
	h := supervisorHarness(t)
	r := h.request(true)
	r.Upstream = config.Upstream{Name: "My LDAP", Type: "ldap", Flow: config.UpstreamFlowPassword}
	r.Username, r.Password = "bob", "wrong"
	err := h.engine(io.Discard).LoginOIDC(context.Background(), r, nonInteractive)
	if !errors.Is(err, oidclogin.ErrPasswordRefused) {
		t.Fatalf("want the password refused, got %v", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatal("the error shows the password")
	}
	if h.idp.AuthCodeGrants.Load() != 0 {
		t.Fatal("a refused password must not reach the token endpoint")
	}
	// Nothing cached: the next run asks again.
	r.Password = "bob-password"
	if err := h.engine(io.Discard).LoginOIDC(context.Background(), r, nonInteractive); err != nil {
		t.Fatal(err)
	}
}

func TestSupervisorPasswordPrompts(t *testing.T) {
	h := supervisorHarness(t)
	h.ui.answers = map[string]string{"Username: ": " bob\n", "Password: ": "bob-password"}
	r := h.request(true)
	r.Upstream = config.Upstream{Name: "My LDAP", Type: "ldap"}
	e := h.engine(io.Discard)
	e.CanPrompt = true
	if err := e.LoginOIDC(context.Background(), r, interactive); err != nil {
		t.Fatal(err)
	}
	if strings.Join(h.ui.asked, "|") != "Username: |Password: " {
		t.Fatalf("asked %q", h.ui.asked)
	}

	// Without a terminal, a missing password is an error that says what
	// to set, not a hang.
	h2 := supervisorHarness(t)
	r2 := h2.request(true)
	r2.Upstream = config.Upstream{Name: "My LDAP", Type: "ldap"}
	r2.Username = "bob"
	err := h2.engine(io.Discard).LoginOIDC(context.Background(), r2, nonInteractive)
	if err == nil || !strings.Contains(err.Error(), "PINNIPED_PASSWORD") {
		t.Fatalf("got %v", err)
	}
}

func TestSupervisorBrowserFlowNamesTheProvider(t *testing.T) {
	h := supervisorHarness(t)
	r := h.request(true)
	r.Upstream = config.Upstream{Name: "okta", Type: "oidc"}
	// Credentials in the environment do not turn a browser-only provider
	// into a password login.
	r.Username, r.Password = "bob", "bob-password"
	if err := h.engine(io.Discard).LoginOIDC(context.Background(), r, interactive); err != nil {
		t.Fatal(err)
	}
	if h.ui.opened.Load() != 1 || h.idp.LastIDP() != "okta" {
		t.Fatalf("browsers %d, IDP %q", h.ui.opened.Load(), h.idp.LastIDP())
	}
}

func TestSupervisorRefusesWhatItDoesNotList(t *testing.T) {
	for name, tc := range map[string]struct {
		up   config.Upstream
		want string
	}{
		"unknown name":     {config.Upstream{Name: "nope"}, `unable to find upstream identity provider with name "nope" and type "oidc"`},
		"wrong type":       {config.Upstream{Name: "okta", Type: "ldap"}, `unable to find upstream identity provider with name "okta" and type "ldap"`},
		"unsupported type": {config.Upstream{Name: "okta", Type: "saml"}, "the Supervisor supports activedirectory, github, ldap, oidc"},
		"flow not offered": {config.Upstream{Name: "okta", Type: "oidc", Flow: config.UpstreamFlowPassword}, "offers the flows browser_authcode"},
	} {
		t.Run(name, func(t *testing.T) {
			h := supervisorHarness(t)
			r := h.request(true)
			r.Upstream = tc.up
			r.Username, r.Password = "bob", "bob-password"
			err := h.engine(io.Discard).LoginOIDC(context.Background(), r, interactive)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
			if h.ui.opened.Load() != 0 || h.idp.AuthCodeGrants.Load() != 0 {
				t.Fatal("a login ran anyway")
			}
		})
	}
}

func TestUpstreamNameNeedsASupervisor(t *testing.T) {
	h := newHarness(t)
	r := h.request(true)
	r.Upstream = config.Upstream{Name: "okta"}
	err := h.engine(io.Discard).LoginOIDC(context.Background(), r, interactive)
	if err == nil || !strings.Contains(err.Error(), "does not appear to be a Pinniped Supervisor") {
		t.Fatalf("got %v", err)
	}
}

var _ loginview.View = (*browserUI)(nil)
