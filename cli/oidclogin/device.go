package oidclogin

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoDeviceFlow means the provider does not advertise a device endpoint.
var ErrNoDeviceFlow = errors.New("the identity provider does not support the device flow (no device_authorization_endpoint)")

// DeviceLogin runs the OAuth 2.0 device authorization grant (RFC 8628): the
// person enters a short code on any device with a browser. It ends when the
// person approves, the code expires, or ctx ends.
func (p *Provider) DeviceLogin(ctx context.Context, ui UI) (*Tokens, error) {
	if p.DeviceAuthURL == "" {
		return nil, ErrNoDeviceFlow
	}
	da, err := p.oauth.DeviceAuth(p.ctx(ctx))
	if err != nil {
		return nil, fmt.Errorf("start device login: %w", err)
	}
	ui.ShowDeviceCode(da.VerificationURI, da.UserCode, da.VerificationURIComplete)
	ui.Progress("waiting for you to approve the login on the other device")
	if !da.Expiry.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, da.Expiry)
		defer cancel()
	}
	tok, err := p.oauth.DeviceAccessToken(p.ctx(ctx), da)
	if err != nil {
		return nil, fmt.Errorf("device login: %w", err)
	}
	return p.tokens(ctx, tok, "")
}
