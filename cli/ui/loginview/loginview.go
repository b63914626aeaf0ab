// Package loginview is what a login and the view showing it say to each
// other: the calls the login runner (cli/login) and its OIDC flows
// (cli/login/oidclogin) make on a View, what the person asks back
// (Request), the outcome (Summary), and the kinds of failure a view
// explains with a next step. The plain lines (cli/ui/plain) and the
// interactive screen (cli/ui/tui) are Views.
//
// It imports only the standard library, so the views need nothing of the
// login to show it, and the login nothing of the views.
package loginview

import (
	"context"
	"errors"
	"time"
)

// Flow is what a running OIDC flow tells the person and hears back. A
// view that cannot prompt returns an error from PromptCode only when ctx
// ends, so a flow waiting on its listener is not cut short.
type Flow interface {
	// Step says what is happening now.
	Step(msg string)
	// Warn reports a problem the login works around, and what the person
	// can do about it (next may be empty). They stay two fields, never one
	// line, so a view can show the next step as such.
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
	// while they wait; a view that cannot be steered returns nil, a channel
	// that never delivers.
	Requests() <-chan Request
}

// View is a whole login's view: a flow's, and the runner's own messages.
type View interface {
	Flow
	// Success reports the outcome of a fresh login.
	Success(s Summary)
	// Ask asks the person for one line (a username, or a password when
	// secret, which is not echoed). The runner calls it only when a person
	// can type.
	Ask(ctx context.Context, prompt string, secret bool) (string, error)
}

// Request is something the person asks a running login to do.
type Request int

// Requests a view may send.
const (
	// RequestOpenBrowser opens the login (or verification) page again,
	// e.g. after the person closed the tab.
	RequestOpenBrowser Request = iota + 1
	// RequestDeviceFlow abandons the browser flow for the device flow,
	// e.g. when the browser is on another machine.
	RequestDeviceFlow
)

// Summary describes a completed login, without secrets.
type Summary struct {
	Username  string
	Groups    []string
	Expires   time.Time
	StoredIn  string
	Refreshed bool
}

// The failures a view explains with their own next step. The flows wrap
// them (errors.Is finds them); anything else gets the view's generic
// advice.
var (
	// ErrLoginDenied means the provider answered the login with an error.
	ErrLoginDenied = errors.New("the identity provider refused the login")
	// ErrNoDeviceFlow means the provider does not advertise a device endpoint.
	ErrNoDeviceFlow = errors.New("the identity provider does not support the device flow (no device_authorization_endpoint)")
	// ErrDeviceLogin marks a device login that started but did not finish
	// (the code expired, was refused, or the provider failed).
	ErrDeviceLogin = errors.New("device login")
)
