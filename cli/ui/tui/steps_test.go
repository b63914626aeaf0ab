package tui

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// testProgram runs programs without a terminal: a fixed size, keys from a
// pipe that never sends anything.
func testProgram() []tea.ProgramOption {
	r, _ := io.Pipe()
	return []tea.ProgramOption{tea.WithWindowSize(80, 24), tea.WithInput(r), tea.WithEnvironment([]string{"TERM=xterm-256color"})}
}

func TestStepsQuickStepIsOneLine(t *testing.T) {
	var out syncBuf
	s := &Steps{Out: &out, Delay: time.Hour, programOptions: testProgram()}
	s.Step("applying 3 objects")
	s.Done("applied 3 objects")
	s.Done("deleted Secret x") // Done without a Step
	got := ansi.Strip(out.String())
	if !strings.HasPrefix(got, "✓ applied 3 objects (0.0s)\n") || !strings.HasSuffix(got, "✓ deleted Secret x\n") || strings.Contains(got, "applying") {
		t.Fatalf("%q", got)
	}
}

func TestStepsSlowStepSpinsThenSettles(t *testing.T) {
	var out syncBuf
	s := &Steps{Out: &out, Delay: 10 * time.Millisecond, programOptions: testProgram()}
	s.Step("waiting: agent Deployment available")
	time.Sleep(400 * time.Millisecond)
	s.Done("agent Deployment available")
	got := ansi.Strip(out.String())
	if !strings.Contains(got, "waiting: agent Deployment available (0s)") {
		t.Fatalf("no spinner line: %q", got)
	}
	if !strings.Contains(got, "✓ agent Deployment available (0.") {
		t.Fatalf("the finished step does not stay: %q", got)
	}
	before := out.String()
	time.Sleep(100 * time.Millisecond)
	if out.String() != before {
		t.Fatal("the screen kept drawing after Done")
	}
}

func TestStepsCloseStopsARunningStep(t *testing.T) {
	var out syncBuf
	s := &Steps{Out: &out, Delay: 10 * time.Millisecond, programOptions: testProgram()}
	s.Step("waiting: a credential strategy works")
	time.Sleep(50 * time.Millisecond)
	s.Close()
	if got := ansi.Strip(out.String()); !strings.Contains(got, "• waiting: a credential strategy works (stopped after") {
		t.Fatalf("%q", got)
	}
	s.Close() // idempotent
}

func TestStepModelCtrlCInterrupts(t *testing.T) {
	interrupted := false
	m := stepModel{step: "x", interrupt: func() { interrupted = true }}
	_, cmd := m.Update(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	if cmd == nil {
		t.Fatal("no command for ctrl+c")
	}
	cmd()
	if !interrupted {
		t.Fatal("ctrl+c did not interrupt")
	}
	if _, cmd := m.Update(tea.KeyPressMsg{Code: 'q', Text: "q"}); cmd != nil {
		t.Fatal("other keys must do nothing")
	}
}

func TestChooseModel(t *testing.T) {
	items := []string{"jwt/dex", "jwt/okta", "webhook/ldap"}
	press := func(m chooseModel, keys ...tea.KeyPressMsg) (chooseModel, bool) {
		quit := false
		for _, k := range keys {
			nm, cmd := m.Update(k)
			m = nm.(chooseModel)
			quit = cmd != nil
		}
		return m, quit
	}
	down, up, enter := tea.KeyPressMsg{Code: tea.KeyDown}, tea.KeyPressMsg{Code: tea.KeyUp}, tea.KeyPressMsg{Code: tea.KeyEnter}
	for _, tt := range []struct {
		name   string
		keys   []tea.KeyPressMsg
		chosen int
		screen string
	}{
		{"first is preselected", []tea.KeyPressMsg{enter}, 0, "✓ Pick one: jwt/dex"},
		{"down, down, enter", []tea.KeyPressMsg{down, down, enter}, 2, "✓ Pick one: webhook/ldap"},
		{"up wraps around", []tea.KeyPressMsg{up, enter}, 2, "webhook/ldap"},
		{"number", []tea.KeyPressMsg{{Code: '2', Text: "2"}}, 1, "jwt/okta"},
		{"out-of-range number is ignored", []tea.KeyPressMsg{{Code: '9', Text: "9"}, enter}, 0, "jwt/dex"},
		{"q cancels", []tea.KeyPressMsg{{Code: 'q', Text: "q"}}, -1, "✗ Pick one: (nothing chosen)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, quit := press(newChooseModel("Pick one:", items), tt.keys...)
			if !quit || m.chosen != tt.chosen {
				t.Fatalf("quit %v chosen %d, want %d", quit, m.chosen, tt.chosen)
			}
			if s := ansi.Strip(m.render()); !strings.Contains(s, tt.screen) {
				t.Fatalf("%q lacks %q", s, tt.screen)
			}
		})
	}
	m, _ := press(newChooseModel("Pick one:", items), down)
	s := ansi.Strip(m.render())
	if !strings.Contains(s, "› 2) jwt/okta") || !strings.Contains(s, "  1) jwt/dex") || !strings.Contains(s, "enter choose") {
		t.Fatalf("list view:\n%s", s)
	}
}

func TestChooseRunsAProgram(t *testing.T) {
	r, w := io.Pipe()
	var out syncBuf
	go func() { _, _ = w.Write([]byte("\x1b[B\r")) }() // down, enter
	i, err := choose(r, &out, "Pick one:", []string{"a", "b"}, tea.WithWindowSize(60, 10))
	if err != nil || i != 1 {
		t.Fatalf("chose %d, %v", i, err)
	}
	if !strings.Contains(ansi.Strip(out.String()), "✓ Pick one: b") {
		t.Fatalf("%q", out.String())
	}
}
