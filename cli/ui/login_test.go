package ui

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
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

// TestNoFormImportsTheLogin: the login reaches its views through
// loginview, a leaf of the standard library, so no package under cli/ui
// needs anything of cli/login.
func TestNoFormImportsTheLogin(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/pinniped-kit/pinniped/"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, mod+"cli/login") {
				t.Errorf("%s imports %s", fields[0], imp)
			}
			if fields[0] == mod+"cli/ui/loginview" && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				t.Errorf("loginview imports %s; it must stay a leaf of the standard library", imp)
			}
		}
	}
}
