package oidclogin

import (
	"context"
	"fmt"

	"github.com/pinniped-kit/pinniped/cache/sessions"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// DeviceLogin runs the OAuth 2.0 device authorization grant (RFC 8628): the
// person enters a short code on any device with a browser. It ends when the
// person approves, the code expires, or ctx ends.
func (p *Provider) DeviceLogin(ctx context.Context, ui loginview.Flow) (*sessions.Tokens, error) {
	if p.DeviceAuthURL == "" {
		return nil, loginview.ErrNoDeviceFlow
	}
	da, err := p.oauth.DeviceAuth(p.ctx(ctx), p.authorizeParams()...)
	if err != nil {
		return nil, fmt.Errorf("start %w: %w", loginview.ErrDeviceLogin, termsafe.Error(err))
	}
	// Shown as the provider sent them, but never able to drive the terminal.
	ui.ShowDeviceCode(termsafe.Visible(da.VerificationURI), termsafe.Visible(da.UserCode), termsafe.Visible(da.VerificationURIComplete))
	ui.Step("waiting for you to approve the login on the other device")
	if !da.Expiry.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, da.Expiry)
		defer cancel()
	}
	// The token poll blocks, so the person's requests are served beside it.
	// "Open the browser" opens the page here; it is the right thing when
	// the person switched from the browser flow on a machine that has one.
	pollCtx, stopRequests := context.WithCancel(ctx)
	defer stopRequests()
	go func() {
		for {
			select {
			case <-pollCtx.Done():
				return
			case req := <-ui.Requests():
				if req != loginview.RequestOpenBrowser {
					continue // already in the device flow
				}
				page := da.VerificationURIComplete
				if page == "" {
					page = da.VerificationURI
				}
				if err := ui.OpenBrowser(page); err != nil {
					ui.Warn("could not open a browser ("+err.Error()+")", "open the link on any device")
				}
			}
		}
	}()
	tok, err := p.oauth.DeviceAccessToken(p.ctx(pollCtx), da)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w not completed: %w", loginview.ErrDeviceLogin, context.Cause(ctx))
		}
		return nil, fmt.Errorf("%w: %w", loginview.ErrDeviceLogin, termsafe.Error(err))
	}
	return p.tokens(ctx, tok, "")
}
