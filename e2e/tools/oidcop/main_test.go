package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// provider starts the OP on an httptest TLS server, as the bed runs it.
func provider(t *testing.T) (issuer string, browser *http.Client, conf *oauth2.Config, ctx context.Context) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	h, err := newHandler(&Config{
		Issuer:  srv.URL,
		Users:   []User{{ID: "2001", Username: "alice", Password: "alice-password", Email: "alice@example.com"}},
		Clients: []Client{{ID: "pinniped-cli", RedirectURIs: []string{"http://127.0.0.1/callback"}}},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	jar, _ := cookiejar.New(nil)
	browser = srv.Client()
	browser.Jar = jar
	// The browser stops at the CLI's loopback callback, which nothing serves here.
	browser.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/callback" {
			return http.ErrUseLastResponse
		}
		return nil
	}
	conf = &oauth2.Config{
		ClientID: "pinniped-cli",
		Endpoint: oauth2.Endpoint{AuthURL: srv.URL + "/authorize", TokenURL: srv.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams},
		// Any port: a CLI listens wherever it can.
		RedirectURL: "http://127.0.0.1:54321/callback",
		Scopes:      []string{"openid", "offline_access", "email"},
	}
	return srv.URL, browser, conf, context.WithValue(context.Background(), oauth2.HTTPClient, srv.Client())
}

// authorize starts a code flow with PKCE in the browser. It returns the login page if the
// provider shows one, or the code if the browser went straight back to the client.
func authorize(t *testing.T, browser *http.Client, conf *oauth2.Config, verifier string) (page *http.Response, code string) {
	t.Helper()
	resp, err := browser.Get(conf.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "nonce-1")))
	if err != nil {
		t.Fatal(err)
	}
	return resp, callbackCode(t, resp)
}

func callbackCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	if resp.StatusCode != http.StatusFound {
		return ""
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Host != "127.0.0.1:54321" || loc.Query().Get("state") != "state-1" {
		t.Fatalf("redirect to %v (%v), want the client's callback with its state", loc, err)
	}
	if e := loc.Query().Get("error"); e != "" {
		t.Fatalf("authorization error %s: %s", e, loc.Query().Get("error_description"))
	}
	return loc.Query().Get("code")
}

func browserLogin(t *testing.T, browser *http.Client, conf *oauth2.Config, ctx context.Context) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	page, code := authorize(t, browser, conf, verifier)
	body, _ := io.ReadAll(page.Body)
	if code != "" || !strings.Contains(string(body), `id="username"`) {
		t.Fatalf("want the login form, got %s:\n%s", page.Status, body)
	}
	form := url.Values{"id": {formValue(t, string(body), "id")}, "username": {"alice"}, "password": {"alice-password"}}
	resp, err := browser.PostForm(page.Request.URL.String(), form)
	if err != nil {
		t.Fatal(err)
	}
	return exchange(t, conf, ctx, callbackCode(t, resp), verifier)
}

func exchange(t *testing.T, conf *oauth2.Config, ctx context.Context, code, verifier string) *oauth2.Token {
	t.Helper()
	if code == "" {
		t.Fatal("no code")
	}
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if tok.RefreshToken == "" || tok.Extra("id_token") == nil {
		t.Fatal("no refresh or ID token for offline_access")
	}
	return tok
}

func formValue(t *testing.T, page, name string) string {
	t.Helper()
	i := strings.Index(page, `name="`+name+`" value="`)
	if i < 0 {
		t.Fatalf("no %s in the form", name)
	}
	v := page[i+len(`name="`+name+`" value="`):]
	return v[:strings.IndexByte(v, '"')]
}

func refresh(conf *oauth2.Config, ctx context.Context, rt string) (*oauth2.Token, error) {
	return conf.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
}

func wantInvalidGrant(t *testing.T, err error, what string) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("%s: want invalid_grant, got %v", what, err)
	}
}

func TestDiscoveryAdvertisesRevocationAndEndSession(t *testing.T) {
	issuer, browser, _, _ := provider(t)
	resp, err := browser.Get(issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`"issuer":"` + issuer + `"`, `"revocation_endpoint":"` + issuer + `/revoke"`, `"end_session_endpoint":"` + issuer + `/end_session"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("discovery lacks %s:\n%s", want, body)
		}
	}
}

func TestRevocationEndsTheRefreshToken(t *testing.T) {
	issuer, browser, conf, ctx := provider(t)
	tok := browserLogin(t, browser, conf, ctx)
	rotated, err := refresh(conf, ctx, tok.RefreshToken)
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if rotated.RefreshToken == "" || rotated.RefreshToken == tok.RefreshToken {
		t.Fatal("the example storage rotates refresh tokens; the tests rely on that")
	}
	_, err = refresh(conf, ctx, tok.RefreshToken)
	wantInvalidGrant(t, err, "the used refresh token")

	// RFC 7009 as a public client: client_id, no secret.
	resp, err := browser.PostForm(issuer+"/revoke", url.Values{"token": {rotated.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {conf.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %s", resp.Status)
	}
	_, err = refresh(conf, ctx, rotated.RefreshToken)
	wantInvalidGrant(t, err, "the revoked refresh token")
}

func TestEndSessionEndsTheBrowserSession(t *testing.T) {
	issuer, browser, conf, ctx := provider(t)
	first := browserLogin(t, browser, conf, ctx)

	// The browser's session logs in again without the password.
	verifier := oauth2.GenerateVerifier()
	_, code := authorize(t, browser, conf, verifier)
	second := exchange(t, conf, ctx, code, verifier)

	// prompt=login asks for the password even so.
	resp, err := browser.Get(conf.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("prompt", "login")))
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), `id="username"`) {
		t.Fatalf("prompt=login skipped the form: %s", resp.Status)
	}

	resp, err = browser.Get(issuer + "/end_session?id_token_hint=" + url.QueryEscape(second.Extra("id_token").(string)))
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="logged-out"`) {
		t.Fatalf("end_session: %s %s", resp.Status, body)
	}
	page, code := authorize(t, browser, conf, oauth2.GenerateVerifier())
	if body, _ := io.ReadAll(page.Body); code != "" || !strings.Contains(string(body), `id="username"`) {
		t.Fatalf("after end_session the browser still logs in without a password: %s", page.Status)
	}
	// The example ends the user's tokens for the client too.
	for _, rt := range []string{first.RefreshToken, second.RefreshToken} {
		_, err = refresh(conf, ctx, rt)
		wantInvalidGrant(t, err, "a refresh token of the ended session")
	}
}
