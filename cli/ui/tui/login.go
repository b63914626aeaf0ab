package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/pinniped-kit/pinniped/cli/ui/browser"
	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// LoginOptions configure Login.
type LoginOptions struct {
	// In is the terminal keys come from (stdin); Out is the terminal to draw
	// on (stderr). Never stdout: it carries the credential for kubectl.
	In  io.Reader
	Out io.Writer
	// Issuer is shown in the header.
	Issuer string
	// Cancel ends the login's context; the person's q or Ctrl-C calls it
	// with ErrCanceled.
	Cancel context.CancelCauseFunc
	// Plain shows what happens before the login needs the person (a silent
	// refresh, a password login), and everything if the screen cannot start.
	Plain loginview.View
	// Getenv reads $BROWSER; nil means os.Getenv.
	Getenv func(string) string
	// Open opens a URL in a browser; nil means browser.Open.
	Open func(url string) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnStart, when set, is called as the screen is about to start: the
	// login needs the person from now on (Plain may then stop holding its
	// lines back, for when the screen cannot start or ends early).
	OnStart func()

	// programOptions are for tests (fixed size, no real terminal).
	programOptions []tea.ProgramOption
}

// Login implements loginview.View with a bubbletea screen. The screen starts only
// when the login needs the person (a link to open, a code to enter or
// paste): the cached and refreshed paths never draw, never switch the
// terminal to raw mode, and print exactly what the plain renderer prints.
type Login struct {
	o        LoginOptions
	requests chan loginview.Request

	mu     sync.Mutex
	prog   *tea.Program
	failed bool
	done   chan struct{}
	runErr error
}

var _ loginview.View = (*Login)(nil)

// NewLogin returns the screen; nothing is drawn yet.
func NewLogin(o LoginOptions) *Login {
	return &Login{o: o, requests: make(chan loginview.Request, 1)}
}

// running reports whether the screen is up.
func (l *Login) running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prog != nil && !l.failed
}

// start brings the screen up, once. It returns false if the screen could
// not start (e.g. raw mode refused); the plain renderer is used from then on.
func (l *Login) start() bool {
	l.mu.Lock()
	if l.failed {
		l.mu.Unlock()
		return false
	}
	if l.prog != nil {
		l.mu.Unlock()
		return true
	}
	if l.o.OnStart != nil {
		l.o.OnStart()
	}
	ready := make(chan struct{})
	var once sync.Once
	m := newLoginModel(l.o.Issuer, l.o.Now, l.requests, l.o.Cancel)
	m.ready = func() { once.Do(func() { close(ready) }) }
	opts := append([]tea.ProgramOption{
		tea.WithInput(l.o.In), tea.WithOutput(l.o.Out),
		// Signals stay with main: SIGINT/SIGTERM cancel the command's
		// context, the login ends, and Finish closes the screen properly.
		tea.WithoutSignalHandler(),
	}, l.o.programOptions...)
	prog := tea.NewProgram(m, opts...)
	done := make(chan struct{})
	l.prog, l.done = prog, done
	l.mu.Unlock()

	go func() {
		_, err := prog.Run()
		l.mu.Lock()
		l.runErr = err
		if err != nil {
			// Killed or crashed: what is left goes to the plain renderer,
			// and Finish lets the command print the error itself.
			l.failed = true
		}
		l.mu.Unlock()
		close(done)
	}()
	select {
	case <-ready:
		return true
	case <-done:
		l.mu.Lock()
		l.failed = true
		err := l.runErr
		l.mu.Unlock()
		l.o.Plain.Warn("the interactive screen could not start ("+errString(err)+")", "plain output instead")
		return false
	}
}

func errString(err error) string {
	if err == nil {
		return "it ended at once"
	}
	return err.Error()
}

func (l *Login) send(msg tea.Msg) {
	l.mu.Lock()
	prog := l.prog
	l.mu.Unlock()
	prog.Send(msg) // a no-op once the program has ended
}

// Step implements loginview.View.
func (l *Login) Step(msg string) {
	if !l.running() {
		l.o.Plain.Step(msg)
		return
	}
	l.send(stepMsg{msg})
}

// Warn implements loginview.View: a note that stays on the screen.
func (l *Login) Warn(problem, next string) {
	if !l.running() {
		l.o.Plain.Warn(problem, next)
		return
	}
	// A problem often quotes an error, which may quote a provider.
	l.send(warnMsg{termsafe.Visible(problem), termsafe.Visible(next)})
}

// ShowLoginURL implements loginview.View; the screen starts here.
func (l *Login) ShowLoginURL(url string) {
	if !l.start() {
		l.o.Plain.ShowLoginURL(url)
		return
	}
	l.send(loginURLMsg{url})
}

// ShowDeviceCode implements loginview.View; the screen starts here.
func (l *Login) ShowDeviceCode(uri, code, complete string) {
	if !l.start() {
		l.o.Plain.ShowDeviceCode(uri, code, complete)
		return
	}
	l.send(deviceCodeMsg{uri: uri, code: code, complete: complete})
}

// OpenBrowser implements loginview.View.
func (l *Login) OpenBrowser(url string) error {
	var err error
	if l.o.Open != nil {
		err = l.o.Open(url)
	} else {
		err = browser.Open(l.o.Getenv, url)
	}
	if l.running() {
		l.send(browserMsg{err})
	}
	return err
}

// PromptCode implements loginview.View: the person presses p (or just pastes)
// to answer.
func (l *Login) PromptCode(ctx context.Context, prompt string) (string, error) {
	if !l.start() {
		return l.o.Plain.PromptCode(ctx, prompt)
	}
	reply := make(chan string, 1)
	l.send(promptMsg{text: prompt, reply: reply})
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	select {
	case s := <-reply:
		return s, nil
	case <-ctx.Done():
		l.send(promptEndMsg{reply})
		return "", ctx.Err()
	case <-done:
		return "", errors.New("the login screen was closed")
	}
}

// Ask implements loginview.View. Usernames and passwords are asked before any
// screen is needed (the password flows never draw one), so the question
// goes to the plain renderer; were the screen up, it would own the
// terminal, and the login ends instead of typing blind into it.
func (l *Login) Ask(ctx context.Context, prompt string, secret bool) (string, error) {
	if l.running() {
		return "", errors.New("cannot ask for a username or password while the login screen is up")
	}
	return l.o.Plain.Ask(ctx, prompt, secret)
}

// Requests implements loginview.View.
func (l *Login) Requests() <-chan loginview.Request { return l.requests }

// Success implements loginview.View.
func (l *Login) Success(s loginview.Summary) {
	if !l.running() {
		l.o.Plain.Success(s)
		return
	}
	l.send(successMsg{s})
}

// Finish closes the screen with the login's outcome and waits until the
// terminal is restored, so kubectl (or the shell) gets it back as it was.
// It returns err, marked as already shown when the screen displayed it.
func (l *Login) Finish(err error) error {
	if !l.running() {
		return err
	}
	l.send(finishMsg{err})
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	<-done
	if err != nil {
		// In plain lines after the screen has ended, whatever it drew: a
		// terminal may clear the screen's last frame, or never show it.
		if errors.Is(err, ErrCanceled) {
			fmt.Fprintln(l.o.Out, "✗ Login cancelled. Nothing was cached; run the command again to log in.")
		} else {
			fmt.Fprintf(l.o.Out, "✗ Login failed: %s\n  Next: %s\n", termsafe.Lines(err.Error()), NextStep(err))
		}
		return &ShownError{Err: err}
	}
	return nil
}

// ShownError is an error the screen has already explained; the command
// line exits non-zero without printing it again.
type ShownError struct{ Err error }

func (e *ShownError) Error() string { return e.Err.Error() }
func (e *ShownError) Unwrap() error { return e.Err }

// AlreadyShown marks the error for cli/commands.
func (e *ShownError) AlreadyShown() bool { return true }
