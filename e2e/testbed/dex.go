package testbed

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// DexUser is a static user of the bed's Dex (local password connector).
type DexUser struct {
	Email    string   `json:"email"`
	Username string   `json:"username"`
	UserID   string   `json:"userID"`
	Password string   `json:"password"`
	Groups   []string `json:"groups"`
}

// DexClientID is Dex's public client: no secret and no redirect URIs, so Dex accepts any
// loopback redirect (http://127.0.0.1:<port>/...), as a CLI needs. Password grant, auth code
// + PKCE, refresh and device flow are all enabled.
const DexClientID = "pinniped-cli"

// SupervisorDexClientID is the test Supervisor's confidential client at Dex: its OIDC
// provider's, for browser and password logins.
const SupervisorDexClientID = "supervisor"

// SupervisorLDAPDexClientID is the public client the test Supervisor's LDAP provider checks
// passwords with. Dex keeps one refresh token per user and client, which the Supervisor
// redeems on every refresh: sharing a client with the OIDC provider (or with CLIs logging
// in at Dex) would let one's login end the other's session.
const SupervisorLDAPDexClientID = "supervisor-ldap"

// Display names of the test Supervisor's identity providers (see
// e2e/tools/supervisor): both log people in at the bed's Dex; the LDAP one
// offers only cli_password and prefixes usernames and groups with "ldap:".
const (
	SupervisorOIDCIDP = "Bed Dex"
	SupervisorLDAPIDP = "Bed LDAP"
)

// DexUsers are the bed's users. Test-only credentials; Dex listens only inside the bed's
// network namespace.
var DexUsers = []DexUser{
	{Email: "alice@example.com", Username: "alice", UserID: "1001", Password: "alice-password", Groups: []string{"developers", "admins"}},
	{Email: "bob@example.com", Username: "bob", UserID: "1002", Password: "bob-password", Groups: []string{"viewers"}},
}

// DexPasswordToken logs a bed user in with the password grant and returns the verified ID
// token and its claims as indented JSON. It must run inside the bed's network namespace.
func (b *Bed) DexPasswordToken(ctx context.Context, email string) (rawIDToken, claimsJSON string, err error) {
	var user *DexUser
	for i := range DexUsers {
		if DexUsers[i].Email == email {
			user = &DexUsers[i]
		}
	}
	if user == nil {
		return "", "", fmt.Errorf("no Dex user %q in the bed (see testbed.DexUsers)", email)
	}
	hc, err := b.DexHTTPClient()
	if err != nil {
		return "", "", err
	}
	ctx = oidc.ClientContext(ctx, hc)
	p, err := oidc.NewProvider(ctx, b.cfg.DexIssuer())
	if err != nil {
		return "", "", fmt.Errorf("discover Dex (log: %s): %w", b.cfg.LogFile("dex"), err)
	}
	conf := oauth2.Config{ClientID: DexClientID, Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile", "groups"}}
	tok, err := conf.PasswordCredentialsToken(ctx, user.Email, user.Password)
	if err != nil {
		return "", "", fmt.Errorf("password grant for %s (log: %s): %w", user.Email, b.cfg.LogFile("dex"), err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: DexClientID}).Verify(ctx, raw)
	if err != nil {
		return "", "", fmt.Errorf("verify ID token: %w", err)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", "", err
	}
	out, err := json.MarshalIndent(claims, "", "  ")
	if err != nil {
		return "", "", err
	}
	return raw, string(out), nil
}
