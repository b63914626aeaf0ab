package ui

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/cli/ui/plain"
)

func TestForLoginWithoutATerminal(t *testing.T) {
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	for _, interactive := range []bool{false, true} {
		var out bytes.Buffer
		l := ForLogin(LoginOptions{In: strings.NewReader("typed\n"), Out: &out, Interactive: interactive, Getenv: func(string) string { return "" }, Issuer: "https://dex", Cancel: cancel})
		lines, ok := l.View.(*plain.Login)
		if !ok || l.CanPrompt || lines.In != nil {
			t.Errorf("interactive=%v: %T, CanPrompt %v: want plain lines that never prompt", interactive, l.View, l.CanPrompt)
		}
		l.Warn("problem", "next")
		if out.String() != "! problem: next\n" {
			t.Errorf("interactive=%v: %q", interactive, out.String())
		}
		want := errors.New("boom")
		if err := l.Finish(want); err != want { //nolint:errorlint // the very error, not wrapped
			t.Errorf("Finish: %v", err)
		}
	}
}
