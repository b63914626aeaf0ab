// Package tty is the one check of what kind of terminal a command has in
// front of it: whether a stream is a terminal at all, and whether the
// interactive screens can be drawn on it.
package tty

import (
	"io"
	"os"

	"golang.org/x/term"
)

// The smallest terminal the interactive screens are drawn in.
const (
	MinWidth  = 40
	MinHeight = 10
)

// IsTerminal reports whether v is a file that is a terminal.
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) //nolint:gosec // fd fits in int
}

// Plain reports whether the person asked for plain lines even at a
// terminal: TERM=dumb, NO_COLOR, or PINNIPED_TUI=0|false|no|off. getenv nil
// means os.Getenv.
func Plain(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv("TERM") == "dumb" || getenv("NO_COLOR") != "" {
		return true
	}
	switch getenv("PINNIPED_TUI") {
	case "0", "false", "no", "off":
		return true
	}
	return false
}

// ScreenUsable reports whether an interactive screen can run: keys from in,
// drawing on out, both terminals, nobody asked for plain lines, and out
// reports a size that fits the screen. A terminal that reports no size
// (embedded terminals and IDE task runners before they lay out, a bare
// pty) or one too small gets plain lines, which always show every message.
func ScreenUsable(in io.Reader, out io.Writer, getenv func(string) string) bool {
	if Plain(getenv) || !IsTerminal(in) || !IsTerminal(out) {
		return false
	}
	w, h, err := term.GetSize(int(out.(*os.File).Fd())) //nolint:gosec // fd fits in int
	return err == nil && w >= MinWidth && h >= MinHeight
}
