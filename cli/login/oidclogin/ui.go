package oidclogin

import (
	"context"
	"errors"
)

// UI is how a login talks to the person. The plain renderer and the TUI are
// two implementations; a non-interactive caller passes one whose Prompt
// returns ErrNoPrompt.
type UI interface {
	// Step says what is happening now.
	Step(msg string)
	// Warn reports a problem the login works around, and what the person
	// can do about it (next may be empty).
	Warn(problem, next string)
	// OpenBrowser tries to open url; an error means the person must open it.
	OpenBrowser(url string) error
	// ShowLoginURL shows the URL to open by hand.
	ShowLoginURL(url string)
	// ShowDeviceCode shows a device-flow code and where to enter it.
	ShowDeviceCode(verificationURI, userCode, verificationURIComplete string)
	// PromptCode asks for a pasted authorization code or redirect URL. It
	// returns when the person answers or ctx ends.
	PromptCode(ctx context.Context, prompt string) (string, error)
	// Requests carries what the person asks of a running flow (open the
	// browser again, switch to the device flow). The flows select on it
	// while they wait; a UI that cannot be steered returns nil, a channel
	// that never delivers.
	Requests() <-chan Request
}

// Request is something the person asks a running login to do.
type Request int

// Requests a UI may send.
const (
	// RequestOpenBrowser opens the login (or verification) page again,
	// e.g. after the person closed the tab.
	RequestOpenBrowser Request = iota + 1
	// RequestDeviceFlow abandons the browser flow for the device flow,
	// e.g. when the browser is on another machine.
	RequestDeviceFlow
)

// ErrSwitchToDevice is returned by BrowserLogin when the person asked for
// the device flow; the caller runs DeviceLogin next. The browser flow's
// listener is closed by then, so a late callback cannot complete it.
var ErrSwitchToDevice = errors.New("switching to the device flow at the person's request")
