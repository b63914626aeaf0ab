// Package ui picks how a command shows things to a person: the
// interactive screens (package tui) when a person is at a usable terminal,
// a spinner line (package terminal) when only the output is a terminal,
// plain lines (package plain) otherwise. Which one is decided here, by
// package tty's check alone, for the three things commands show: a
// login's progress (ForLogin), a long wait's steps (For) and a choice
// (Choose).
//
// A login talks to its view through package loginview, a leaf that the
// login packages and the forms share, so no package under cli/ui imports
// cli/login.
package ui

import (
	"errors"
	"io"
	"time"

	"github.com/pinniped-kit/pinniped/cli/ui/plain"
	"github.com/pinniped-kit/pinniped/cli/ui/terminal"
	"github.com/pinniped-kit/pinniped/cli/ui/tty"
	"github.com/pinniped-kit/pinniped/cli/ui/tui"
)

// Reporter is what long waits report to.
type Reporter interface {
	Step(msg string)
	Done(msg string)
}

// For picks the renderer for a long wait shown on w: the interactive screen
// when stdin and w are a usable terminal; the spinner line when only w is
// (the screen needs the keyboard, to keep typed keys from breaking its
// layout); plain lines otherwise (pipes, CI logs, NO_COLOR, TERM=dumb).
func For(in io.Reader, w io.Writer, getenv func(string) string) Reporter {
	switch {
	case tty.ScreenUsable(in, w, getenv):
		return &tui.Steps{In: in, Out: w}
	case tty.IsTerminal(w) && !tty.Plain(getenv):
		return &terminal.Steps{W: w}
	}
	return &plain.Steps{Now: time.Now, W: w}
}

// Close ends a step left running when the wait was cut short (an error or
// an interrupt), so the terminal is restored before the error is printed.
// Call it (deferred) on every Reporter from For.
func Close(r Reporter) {
	if c, ok := r.(interface{ Close() }); ok {
		c.Close()
	}
}

// ErrNotATerminal means a choice was needed but nobody can be asked.
var ErrNotATerminal = errors.New("not a terminal")

// Choose asks a person at the terminal to pick one of items: the
// interactive chooser when the screen is usable, a numbered prompt when
// not. It returns ErrNotATerminal when in is not a terminal, for the caller
// to explain how to choose with flags.
func Choose(in io.Reader, out io.Writer, getenv func(string) string, title string, items []string) (int, error) {
	if !tty.IsTerminal(in) {
		return 0, ErrNotATerminal
	}
	if tty.ScreenUsable(in, out, getenv) {
		i, err := tui.Choose(in, out, title, items)
		if errors.Is(err, tui.ErrNoChoice) {
			return 0, errors.New("nothing chosen")
		}
		return i, err
	}
	return plain.Choose(in, out, title, items)
}
