package login_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/login"
	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/execcred"
)

// TestSkewRenewsEarlier: a request with a MinValid (pinniped proxy's)
// takes a cached credential only while it has more than that left, and
// otherwise trades for a fresh one, which it caches under the key kubectl
// uses: kubectl's request (none) reuses what the proxy's cached.
func TestSkewRenewsEarlier(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	cluster := login.Request{Cluster: config.Cluster{Server: "https://cluster.example", CA: []byte("ca")}}
	proxy, kubectl := h.engine(nil), h.engine(nil)
	get := func(e *login.Runner) time.Time {
		t.Helper()
		req := cluster
		if e == proxy {
			req.MinValid = 2 * time.Minute
		}
		cred, err := e.CredentialOIDC(ctx, h.request(true), req)
		if err != nil {
			t.Fatal(err)
		}
		return cred.ExpirationTimestamp
	}

	first := get(proxy) // a login and an exchange; the credential lives 5 minutes
	if n := h.exchanges.Load(); n != 1 {
		t.Fatalf("%d exchanges for the first credential", n)
	}
	h.clk.add(2*time.Minute + 30*time.Second) // 2m30s left: more than the MinValid
	if got := get(proxy); !got.Equal(first) || h.exchanges.Load() != 1 {
		t.Fatalf("with 2m30s left of a 2m MinValid the proxy exchanged again (%d exchanges)", h.exchanges.Load())
	}

	h.clk.add(time.Minute) // 1m30s left: less than the MinValid, more than kubectl's 30 s
	if got := get(kubectl); !got.Equal(first) || h.exchanges.Load() != 1 {
		t.Fatalf("kubectl's engine exchanged with 1m30s left (%d exchanges)", h.exchanges.Load())
	}
	second := get(proxy)
	if h.exchanges.Load() != 2 || !second.After(first) {
		t.Fatalf("with 1m30s left of a 2m MinValid the proxy reused the credential (%d exchanges)", h.exchanges.Load())
	}
	if left := second.Sub(h.clk.now()); left < 4*time.Minute {
		t.Fatalf("the fresh credential has only %v left", left)
	}
	// The same cache key: kubectl now finds the proxy's credential.
	if got := get(kubectl); !got.Equal(second) || h.exchanges.Load() != 2 {
		t.Fatalf("kubectl did not find the proxy's fresh credential (%d exchanges)", h.exchanges.Load())
	}
	if n := h.idp.AuthCodeGrants.Load(); n != 1 {
		t.Fatalf("%d browser logins; the session serves every exchange", n)
	}
}

// TestSkewAppliesToTheTokenItself: without the agent the ID token is the
// credential, so a request with a MinValid (pinniped proxy renewing a third of
// an hour before expiry) refreshes a token with less than the MinValid left
// instead of handing back the very token it renews, although that token
// has more than MinIDTokenLifetime left.
func TestSkewAppliesToTheTokenItself(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	proxy := h.engine(nil)
	first, err := proxy.CredentialOIDC(ctx, h.request(false), login.Request{Interactive: true})
	if err != nil {
		t.Fatal(err)
	}
	h.clk.add(41 * time.Minute) // 19 minutes left of the hour
	second, err := proxy.CredentialOIDC(ctx, h.request(false), login.Request{MinValid: 20 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if second.Token == first.Token || !second.ExpirationTimestamp.After(first.ExpirationTimestamp) || h.idp.RefreshGrants.Load() != 1 {
		t.Fatalf("with 19m left and a 20m MinValid: same token %v, expiry %v then %v, %d refreshes; want a refreshed token",
			second.Token == first.Token, first.ExpirationTimestamp, second.ExpirationTimestamp, h.idp.RefreshGrants.Load())
	}
}

// TestCredentialStatic: without the agent the credential is the token and
// has no expiry (the caller must not schedule a renewal); with it, the
// agent's credential, cached under kubectl's key.
func TestCredentialStatic(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	cred, err := h.engine(nil).CredentialStatic(ctx, &config.Static{Token: "tok"}, login.Request{})
	if err != nil || cred.Token != "tok" || !cred.ExpirationTimestamp.IsZero() {
		t.Fatalf("%+v, %v", cred, err)
	}
	conc := &config.Concierge{Endpoint: "https://c", AuthenticatorType: "webhook", AuthenticatorName: "w"}
	first, err := h.engine(nil).CredentialStatic(ctx, &config.Static{Token: "tok", Concierge: conc}, login.Request{})
	if err != nil || first.ClientCertificateData != "cert" {
		t.Fatalf("%+v, %v", first, err)
	}
	var out bytes.Buffer
	if err := h.engine(&out).LoginStatic(ctx, &config.Static{Token: "tok", Concierge: conc}, interactive); err != nil {
		t.Fatal(err)
	}
	if h.exchanges.Load() != 1 || decode(t, out.Bytes())["status"].(map[string]any)["expirationTimestamp"] != first.ExpirationTimestamp.Add(-execcred.RenewAhead).UTC().Format(time.RFC3339) {
		t.Fatalf("kubectl did not get the cached credential: %d exchanges, %s", h.exchanges.Load(), out.String())
	}
}

// TestUnattendedNeedsAPerson: an Unattended request (pinniped proxy renewing
// in the background) never starts a login a person must finish, and says
// so with ErrNeedsPerson; what needs nobody (the cache, a refresh, a
// password from the environment) still works.
func TestUnattendedNeedsAPerson(t *testing.T) {
	ctx := context.Background()
	withAnswers := func(h *harness) *login.Runner {
		e := h.engine(nil)
		e.UI = &browserUI{ca: h.idp.CABundle, answers: map[string]string{"Username: ": "alice", "Password: ": "password"}}
		return e
	}
	nobody := login.Request{Unattended: true}

	h := newHarness(t)
	if _, err := withAnswers(h).CredentialOIDC(ctx, h.request(true), nobody); !errors.Is(err, login.ErrNeedsPerson) {
		t.Fatalf("no session: %v, want ErrNeedsPerson", err)
	}
	if h.ui.opened.Load() != 0 || h.idp.AuthCodeGrants.Load() != 0 {
		t.Fatal("an unattended engine started a browser login")
	}
	// A person logs in; later the background renewal refreshes alone.
	if _, err := h.engine(nil).CredentialOIDC(ctx, h.request(true), login.Request{Interactive: true}); err != nil {
		t.Fatal(err)
	}
	h.clk.add(55 * time.Minute)
	if _, err := withAnswers(h).CredentialOIDC(ctx, h.request(true), nobody); err != nil {
		t.Fatalf("an unattended refresh: %v", err)
	}
	if h.idp.RefreshGrants.Load() != 1 || h.ui.opened.Load() != 1 {
		t.Fatalf("refreshes %d, browsers %d", h.idp.RefreshGrants.Load(), h.ui.opened.Load())
	}
	// The refresh is refused: only a person can help now.
	h.clk.add(2 * time.Hour)
	h.idp.FailRefresh.Store(true)
	if _, err := withAnswers(h).CredentialOIDC(ctx, h.request(true), nobody); !errors.Is(err, login.ErrNeedsPerson) {
		t.Fatalf("refresh refused: %v, want ErrNeedsPerson", err)
	}
	if h.ui.opened.Load() != 1 {
		t.Fatal("an unattended engine opened a browser")
	}

	device := h.request(true)
	device.Flow = config.FlowDevice
	if _, err := withAnswers(h).CredentialOIDC(ctx, device, nobody); !errors.Is(err, login.ErrNeedsPerson) {
		t.Fatalf("device flow: %v, want ErrNeedsPerson", err)
	}

	// A password from the environment needs nobody; a missing one is
	// never asked for, even of a UI that would answer.
	h = newHarness(t)
	pw := h.request(true)
	pw.Flow, pw.Username, pw.Password = config.FlowPassword, "alice", "password"
	if _, err := withAnswers(h).CredentialOIDC(ctx, pw, nobody); err != nil || h.idp.PasswordGrants.Load() != 1 {
		t.Fatalf("password from the environment: %v, %d grants", err, h.idp.PasswordGrants.Load())
	}
	h = newHarness(t)
	pw = h.request(true)
	pw.Flow, pw.Username = config.FlowPassword, "alice"
	e := withAnswers(h)
	e.CanPrompt = true
	if _, err := e.CredentialOIDC(ctx, pw, nobody); !errors.Is(err, login.ErrNeedsPerson) || len(e.UI.(*browserUI).asked) != 0 {
		t.Fatalf("password without PINNIPED_PASSWORD: %v, asked %v", err, e.UI.(*browserUI).asked)
	}
}
