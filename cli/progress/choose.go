package progress

import (
	"io"
	"os"

	"golang.org/x/term"
)

// Reporter is what long waits report to.
type Reporter interface {
	Step(msg string)
	Done(msg string)
}

// For picks Terminal when w is a terminal that can redraw, Plain otherwise
// (pipes, CI logs, NO_COLOR, TERM=dumb).
func For(w io.Writer) Reporter {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && //nolint:gosec // fd fits in int
		os.Getenv("TERM") != "dumb" && os.Getenv("NO_COLOR") == "" {
		return &Terminal{W: w}
	}
	return &Plain{W: w}
}
