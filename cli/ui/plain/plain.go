// Package plain is the line-by-line form of what commands show a person: a
// login's progress (Login, a loginview.View), a long wait's steps (Steps)
// and a numbered chooser (Choose). It writes to stderr, never stdout,
// which carries the credential for kubectl. Package tui draws the same
// things as screens.
package plain

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/pinniped-kit/pinniped/cli/ui/browser"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
	"github.com/pinniped-kit/pinniped/cli/ui/tty"
)

// Login is a login's progress in lines.
type Login struct {
	Err io.Writer
	// In is the terminal to read pasted codes from; nil means no prompts.
	In io.Reader
	// Getenv reads $BROWSER; nil means os.Getenv.
	Getenv func(string) string
	// Open opens a URL in a browser; nil means browser.Open.
	Open func(url string) error

	once  sync.Once
	lines chan string
	mu    sync.Mutex
}

var _ loginview.View = (*Login)(nil)

// Step implements loginview.View.
func (p *Login) Step(msg string) { fmt.Fprintf(p.Err, "• %s\n", msg) }

// Warn implements loginview.View.
func (p *Login) Warn(problem, next string) {
	// A problem often quotes an error, which may quote a provider.
	problem, next = termsafe.Visible(problem), termsafe.Visible(next)
	if next == "" {
		fmt.Fprintf(p.Err, "! %s\n", problem)
		return
	}
	fmt.Fprintf(p.Err, "! %s: %s\n", problem, next)
}

// ShowLoginURL implements loginview.View.
func (p *Login) ShowLoginURL(url string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.Err, "Log in by visiting this link:\n\n    %s\n\n", url)
}

// ShowDeviceCode implements loginview.View.
func (p *Login) ShowDeviceCode(uri, code, complete string) {
	fmt.Fprintf(p.Err, "To log in, open %s on any device and enter the code:\n\n    %s\n\n", uri, code)
	if complete != "" {
		// On a line of its own, so a double-click or a terminal's link
		// detection takes the whole URL and nothing else.
		fmt.Fprintf(p.Err, "Or open this link, which fills in the code:\n\n    %s\n\n", complete)
	}
}

// OpenBrowser implements loginview.View.
func (p *Login) OpenBrowser(url string) error {
	if p.Open != nil {
		return p.Open(url)
	}
	return browser.Open(p.Getenv, url)
}

// Requests implements loginview.View. Lines typed at the plain prompt are codes,
// so there is no way to ask for anything else: the channel is nil.
func (p *Login) Requests() <-chan loginview.Request { return nil }

// PromptCode implements loginview.View. Lines are read by one goroutine for the
// life of the process, so a prompt abandoned when the browser wins does not
// swallow the next answer.
func (p *Login) PromptCode(ctx context.Context, prompt string) (string, error) {
	if p.In == nil {
		<-ctx.Done()
		return "", ctx.Err()
	}
	p.once.Do(func() {
		p.lines = make(chan string)
		go func() {
			sc := bufio.NewScanner(p.In)
			sc.Buffer(make([]byte, 64<<10), 64<<10)
			for sc.Scan() {
				p.lines <- sc.Text()
			}
			close(p.lines)
		}()
	})
	fmt.Fprint(p.Err, prompt)
	select {
	case <-ctx.Done():
		fmt.Fprintln(p.Err)
		return "", ctx.Err()
	case line, ok := <-p.lines:
		if !ok {
			return "", io.EOF
		}
		return line, nil
	}
}

// Ask implements loginview.View. It reads from the terminal directly, a byte at
// a time, so nothing typed after the answer is taken; a secret is read
// with echo off, and the terminal is restored if the login ends first.
func (p *Login) Ask(ctx context.Context, prompt string, secret bool) (string, error) {
	if p.In == nil {
		return "", errors.New("no terminal to ask on")
	}
	var restore func()
	read := func() (string, error) { return readLine(p.In) }
	if secret {
		f, ok := p.In.(interface{ Fd() uintptr })
		if !ok || !tty.IsTerminal(p.In) {
			return "", errors.New("a password is read only from a terminal, where it is not shown")
		}
		fd := int(f.Fd())
		state, err := term.GetState(fd)
		if err != nil {
			return "", fmt.Errorf("read the terminal's settings: %w", err)
		}
		restore = func() { _ = term.Restore(fd, state) }
		read = func() (string, error) {
			b, err := term.ReadPassword(fd)
			return string(b), err
		}
	}
	fmt.Fprint(p.Err, prompt)
	type answer struct {
		s   string
		err error
	}
	got := make(chan answer, 1)
	go func() {
		s, err := read()
		got <- answer{s, err}
	}()
	select {
	case a := <-got:
		if secret {
			fmt.Fprintln(p.Err) // the Enter was not echoed
		}
		return a.s, a.err
	case <-ctx.Done():
		if restore != nil {
			restore()
		}
		fmt.Fprintln(p.Err)
		return "", context.Cause(ctx)
	}
}

// readLine reads up to a newline, without the newline or a carriage return.
func readLine(r io.Reader) (string, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				return strings.TrimSuffix(string(line), "\r"), nil
			}
			if len(line) >= 4096 {
				return "", errors.New("the answer is too long")
			}
			line = append(line, b[0])
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return string(line), nil
			}
			return "", err
		}
	}
}

// Success implements loginview.View.
func (p *Login) Success(s loginview.Summary) {
	verb := "Logged in"
	if s.Refreshed {
		verb = "Session refreshed"
	}
	who := s.Username
	if len(s.Groups) > 0 {
		who += " (groups: " + strings.Join(s.Groups, ", ") + ")"
	}
	if who == "" {
		who = "you"
	}
	fmt.Fprintf(p.Err, "✓ %s as %s; credential valid until %s, cached in %s\n", verb, who, s.Expires.Local().Format(time.Kitchen), s.StoredIn)
}
