package plain_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/cli/ui/plain"
)

func TestAskReadsOneLineAndNoMore(t *testing.T) {
	in := strings.NewReader("bob\r\nnext line\n")
	var errOut bytes.Buffer
	p := &plain.Login{Err: &errOut, In: in}
	got, err := p.Ask(context.Background(), "Username: ", false)
	if err != nil || got != "bob" {
		t.Fatalf("got %q, %v", got, err)
	}
	if errOut.String() != "Username: " {
		t.Fatalf("stderr %q", errOut.String())
	}
	rest, _ := io.ReadAll(in)
	if string(rest) != "next line\n" {
		t.Fatalf("the answer took more than its line: left %q", rest)
	}
}

func TestAskSecretNeedsATerminal(t *testing.T) {
	p := &plain.Login{Err: io.Discard, In: strings.NewReader("hunter2\n")}
	if _, err := p.Ask(context.Background(), "Password: ", true); err == nil || !strings.Contains(err.Error(), "terminal") {
		t.Fatalf("a password read from a non-terminal, where it may be shown: %v", err)
	}
	if _, err := (&plain.Login{Err: io.Discard}).Ask(context.Background(), "Username: ", false); err == nil {
		t.Fatal("asked with no terminal at all")
	}
}

func TestAskEndsWithTheLogin(t *testing.T) {
	r, w := io.Pipe()
	defer func() { _ = w.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := (&plain.Login{Err: io.Discard, In: r}).Ask(ctx, "Username: ", false); err == nil {
		t.Fatal("an unanswered question outlived the login")
	}
}
