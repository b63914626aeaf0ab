package oidclogin

import "context"

// UI is how a login talks to the person. The plain renderer and the TUI are
// two implementations; a non-interactive caller passes one whose Prompt
// returns ErrNoPrompt.
type UI interface {
	// Progress says what is happening now.
	Progress(msg string)
	// OpenBrowser tries to open url; an error means the person must open it.
	OpenBrowser(url string) error
	// ShowLoginURL shows the URL to open by hand.
	ShowLoginURL(url string)
	// ShowDeviceCode shows a device-flow code and where to enter it.
	ShowDeviceCode(verificationURI, userCode, verificationURIComplete string)
	// PromptCode asks for a pasted authorization code or redirect URL. It
	// returns when the person answers or ctx ends.
	PromptCode(ctx context.Context, prompt string) (string, error)
}
