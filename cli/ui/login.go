package ui

import (
	"context"
	"io"
	"time"

	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/plain"
	"github.com/pinniped-kit/pinniped/cli/ui/tty"
	"github.com/pinniped-kit/pinniped/cli/ui/tui"
)

// LoginOptions are what a login's view is picked and built from.
type LoginOptions struct {
	// In is where a person types (stdin); Out is where the login is shown
	// (stderr). Never stdout: it carries the credential for kubectl.
	In  io.Reader
	Out io.Writer
	// Interactive is kubectl's word that a person is there (the
	// ExecCredential's spec.interactive); without it nobody is asked
	// anything, whatever the terminals.
	Interactive bool
	Getenv      func(string) string
	// Open opens a URL in a browser; nil means browser.Open.
	Open func(url string) error
	// Now is the screen's clock; nil means time.Now.
	Now func() time.Time
	// Issuer is shown in the screen's header.
	Issuer string
	// Cancel ends the login's context; the screen's cancel key calls it
	// with tui.ErrCanceled. Nil: the screen is never picked, as nothing
	// could act on its cancel key.
	Cancel context.CancelCauseFunc
	// Quiet shows nothing of a login that needs no person (kubectl's
	// silent renewals) and each warning only when Once allows (nil: every
	// time); a login that needs the person shows everything.
	Quiet bool
	Once  func(warning string) bool
}

// Login is a login's view, as ForLogin picked it.
type Login struct {
	loginview.View
	// CanPrompt is set when a person can type answers into the view: the
	// paste prompt and the password prompt need it; a browser login does
	// not.
	CanPrompt bool

	screen *tui.Login
}

// ForLogin picks how a login is shown, by the one terminal check (tty):
//
//   - the interactive screen, when kubectl says a person is there and the
//     screen is usable on In and Out. It draws nothing until the login
//     needs the person, so a cached or refreshed login prints what plain
//     lines would (nothing at all, when Quiet);
//   - plain lines that can prompt, when a person is there and In is a
//     terminal;
//   - plain lines alone (no prompts) otherwise: a browser login still
//     works, as its link is printed and opened.
func ForLogin(o LoginOptions) *Login {
	lines := &plain.Login{Err: o.Out, Getenv: o.Getenv, Open: o.Open}
	var view loginview.View = lines
	var onStart func()
	if o.Quiet {
		q := &quiet{View: lines, once: o.Once}
		view, onStart = q, q.engage
	}
	l := &Login{View: view, CanPrompt: o.Interactive && tty.IsTerminal(o.In)}
	if l.CanPrompt {
		lines.In = o.In
	}
	if o.Interactive && o.Cancel != nil && tty.ScreenUsable(o.In, o.Out, o.Getenv) {
		l.screen = tui.NewLogin(tui.LoginOptions{
			In: o.In, Out: o.Out, Issuer: o.Issuer, Cancel: o.Cancel, Plain: view, Getenv: o.Getenv, Open: o.Open, Now: o.Now,
			OnStart: onStart,
		})
		l.View = l.screen
	}
	return l
}

// Finish ends the view with the login's outcome and returns err, marked
// as already shown when the screen displayed it. Call it with the login's
// result on every Login from ForLogin: the screen restores the terminal
// here.
func (l *Login) Finish(err error) error {
	if l.screen == nil {
		return err
	}
	return l.screen.Finish(err)
}
