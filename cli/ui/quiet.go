package ui

import (
	"context"
	"sync"

	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
)

// quiet is a login's view while nobody needs to see it. A renewal that
// needs no person (a cached session refreshed, a token exchanged) shows
// nothing: kubectl shows a plugin's stderr at every call, scripts capture
// it, and full-screen clients (k9s) run the plugin with their own terminal
// as its stderr, where lines would be drawn over their screen. Once the
// login needs the person (a link to open, a code, a question) it shows the
// steps so far and everything after. Until then a warning is shown when
// once allows (once per cause per day); failures are the command's to
// print.
type quiet struct {
	loginview.View
	once func(warning string) bool

	mu      sync.Mutex
	engaged bool
	steps   []string
}

// engage shows the steps held back so far; from now on everything shows.
func (q *quiet) engage() {
	q.mu.Lock()
	if q.engaged {
		q.mu.Unlock()
		return
	}
	q.engaged = true
	steps := q.steps
	q.steps = nil
	q.mu.Unlock()
	for _, s := range steps {
		q.View.Step(s)
	}
}

func (q *quiet) Step(msg string) {
	q.mu.Lock()
	if !q.engaged {
		q.steps = append(q.steps, msg)
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	q.View.Step(msg)
}

// Warn shows a warning of a login nobody takes part in once per cause per
// day (once); a person taking part sees every one.
func (q *quiet) Warn(problem, next string) {
	q.mu.Lock()
	engaged := q.engaged
	q.mu.Unlock()
	if !engaged && q.once != nil && !q.once(problem) {
		return
	}
	q.View.Warn(problem, next)
}

func (q *quiet) OpenBrowser(url string) error {
	q.engage()
	return q.View.OpenBrowser(url)
}

func (q *quiet) ShowLoginURL(url string) {
	q.engage()
	q.View.ShowLoginURL(url)
}

func (q *quiet) ShowDeviceCode(uri, code, complete string) {
	q.engage()
	q.View.ShowDeviceCode(uri, code, complete)
}

func (q *quiet) PromptCode(ctx context.Context, prompt string) (string, error) {
	q.engage()
	return q.View.PromptCode(ctx, prompt)
}

func (q *quiet) Ask(ctx context.Context, prompt string, secret bool) (string, error) {
	q.engage()
	return q.View.Ask(ctx, prompt, secret)
}

// Success is shown to a person who took part in the login; a silent
// renewal's outcome is the credential itself.
func (q *quiet) Success(s loginview.Summary) {
	q.mu.Lock()
	engaged := q.engaged
	q.mu.Unlock()
	if engaged {
		q.View.Success(s)
	}
}
