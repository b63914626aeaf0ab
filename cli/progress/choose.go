package progress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/term"

	"github.com/pinniped-kit/pinniped/cli/tui"
)

// Reporter is what long waits report to.
type Reporter interface {
	Step(msg string)
	Done(msg string)
}

// For picks the renderer for w: the interactive screen (cli/tui) when
// stdin and w are terminals; Terminal when only w is (the screen needs the
// keyboard, to keep typed keys from breaking its layout); Plain otherwise
// (pipes, CI logs, NO_COLOR, TERM=dumb).
func For(w io.Writer) Reporter {
	if !isTerminal(w) || os.Getenv("TERM") == "dumb" || os.Getenv("NO_COLOR") != "" {
		return &Plain{W: w}
	}
	if tui.Usable(os.Stdin, w, nil) {
		return &tui.Steps{In: os.Stdin, Out: w}
	}
	return &Terminal{W: w}
}

// Close ends a step left running when the wait was cut short (an error or
// an interrupt), so the terminal is restored before the error is printed.
// Call it (deferred) on every Reporter from For.
func Close(r Reporter) {
	if c, ok := r.(interface{ Close() }); ok {
		c.Close()
	}
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) //nolint:gosec // fd fits in int
}

// ErrNotATerminal means a choice was needed but nobody can be asked.
var ErrNotATerminal = errors.New("not a terminal")

// Choose asks a person at the terminal to pick one of items: the
// interactive chooser when the screen is usable, a numbered prompt when
// not (NO_COLOR, TERM=dumb). It returns ErrNotATerminal when in is not a
// terminal, for the caller to explain how to choose with flags.
func Choose(in io.Reader, out io.Writer, title string, items []string) (int, error) {
	if !isTerminal(in) {
		return 0, ErrNotATerminal
	}
	if tui.Usable(in, out, nil) {
		i, err := tui.Choose(in, out, title, items)
		if errors.Is(err, tui.ErrNoChoice) {
			return 0, errors.New("nothing chosen")
		}
		return i, err
	}
	fmt.Fprintln(out, title)
	for i, s := range items {
		fmt.Fprintf(out, "  %d) %s\n", i+1, s)
	}
	sc := bufio.NewScanner(in)
	for {
		fmt.Fprintf(out, "Choose [1-%d]: ", len(items))
		if !sc.Scan() {
			return 0, errors.New("nothing chosen")
		}
		n, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err == nil && n >= 1 && n <= len(items) {
			return n - 1, nil
		}
	}
}
