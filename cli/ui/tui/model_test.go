package tui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
)

const issuer = "https://dex.example.com:5556"

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.Local)

func key(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

// fixture is a model at 12 s into a login, with its channels.
type fixture struct {
	m        loginModel
	requests chan loginview.Request
	canceled error
	reply    chan string
}

func newFixture(width int) *fixture {
	f := &fixture{requests: make(chan loginview.Request, 1), reply: make(chan string, 1)}
	now := t0
	f.m = newLoginModel(issuer, func() time.Time { return now }, f.requests, func(err error) { f.canceled = err })
	now = t0.Add(12 * time.Second)
	f.m, _ = f.step(tea.WindowSizeMsg{Width: width, Height: 30})
	return f
}

func (f *fixture) step(msg tea.Msg) (loginModel, tea.Cmd) {
	m, cmd := f.m.Update(msg)
	f.m = m.(loginModel)
	return f.m, cmd
}

// run applies messages, running each returned command once (not batches,
// ticks or prints), as the program would.
func (f *fixture) run(msgs ...tea.Msg) []tea.Cmd {
	var cmds []tea.Cmd
	for _, msg := range msgs {
		_, cmd := f.step(msg)
		if cmd != nil {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

func (f *fixture) screen() string { return ansi.Strip(f.m.render()) }

var authURL = "https://dex.example.com:5556/auth?client_id=pinniped-cli&code_challenge=abc&redirect_uri=http%3A%2F%2F127.0.0.1%3A41234%2Fcallback&state=xyz"

func browserWaiting(f *fixture) {
	f.run(loginURLMsg{authURL}, browserMsg{nil}, stepMsg{"waiting for you to log in"}, promptMsg{text: "paste", reply: f.reply})
}

func TestLoginModelStates(t *testing.T) {
	tests := []struct {
		name    string
		width   int
		setup   func(f *fixture)
		want    []string
		notWant []string
		check   func(t *testing.T, f *fixture)
	}{
		{
			name:  "starting",
			setup: func(*fixture) {},
			want:  []string{"pinniped · logging in to " + issuer, "starting (12s)", "q cancel"},
			// No link yet: keys that need one are not offered.
			notWant: []string{"open browser", "device code", "paste code"},
		},
		{
			name:  "waiting for the browser",
			setup: browserWaiting,
			want: []string{"waiting for you to log in (12s)", "browser window that just opened",
				"o open browser", "u print link", "c copy link", "p paste code", "d device code", "q cancel"},
		},
		{
			name: "no browser could be opened",
			setup: func(f *fixture) {
				f.run(loginURLMsg{authURL}, browserMsg{errors.New("no opener")},
					warnMsg{"could not open a browser (no opener)", "open the link above by hand"}, stepMsg{"waiting for you to log in"})
			},
			want: []string{"No browser could be opened here", "! could not open a browser", "waiting for you to log in"},
		},
		{
			name: "paste prompt",
			setup: func(f *fixture) {
				browserWaiting(f)
				f.run(key("p"))
				for _, r := range "abc" {
					f.run(key(string(r)))
				}
				f.run(key("backspace"), key("d")) // d is typed, not "device"
			},
			want:    []string{"Paste the authorization code", "> abd", "enter submit", "esc back"},
			notWant: []string{"q cancel"},
			check: func(t *testing.T, f *fixture) {
				if len(f.requests) != 0 {
					t.Fatal("a key typed into the prompt was taken as a command")
				}
				f.run(key("enter"))
				if got := <-f.reply; got != "abd" {
					t.Fatalf("answered %q", got)
				}
				if f.m.pasting || f.m.prompt != nil {
					t.Fatal("the prompt stayed open after enter")
				}
				// The flow refuses it and asks again: the prompt reopens at once.
				f.run(warnMsg{"that does not look like an authorization code or redirect URL", "paste the code again"}, promptMsg{text: "paste", reply: f.reply})
				if !f.m.pasting || !strings.Contains(f.screen(), "! that does not look like") {
					t.Fatalf("a refused paste should reopen the prompt with the reason:\n%s", f.screen())
				}
			},
		},
		{
			name: "bracketed paste answers the prompt",
			setup: func(f *fixture) {
				browserWaiting(f)
				f.run(tea.PasteMsg{Content: "http://127.0.0.1:0/callback?code=c0de&state=xyz\n"})
			},
			want: []string{"> http://127.0.0.1:0/callback?code=c0de&state=xyz"},
		},
		{
			name: "esc leaves the prompt, then q cancels",
			setup: func(f *fixture) {
				browserWaiting(f)
				f.run(key("p"), key("esc"))
			},
			want: []string{"p paste code"},
			check: func(t *testing.T, f *fixture) {
				cmds := f.run(key("q"))
				if len(cmds) != 1 {
					t.Fatal("q gave no cancel command")
				}
				cmds[0]()
				if !errors.Is(f.canceled, ErrCanceled) {
					t.Fatalf("cancel cause %v", f.canceled)
				}
				if !strings.Contains(f.screen(), "cancelling") {
					t.Fatal(f.screen())
				}
			},
		},
		{
			name: "open again, show and copy the link",
			setup: func(f *fixture) {
				browserWaiting(f)
			},
			check: func(t *testing.T, f *fixture) {
				f.run(key("o"))
				if r := <-f.requests; r != loginview.RequestOpenBrowser {
					t.Fatalf("request %v", r)
				}
				if cmds := f.run(key("u")); len(cmds) != 1 || fmt.Sprint(cmds[0]()) != fmt.Sprint(tea.Println(authURL)()) {
					t.Fatal("u does not print the full link above the screen")
				}
				if cmds := f.run(key("c")); len(cmds) != 1 || fmt.Sprint(cmds[0]()) != fmt.Sprint(tea.SetClipboard(authURL)()) {
					t.Fatal("c does not copy the link")
				}
				if !strings.Contains(f.screen(), "copied the link") {
					t.Fatal(f.screen())
				}
			},
		},
		{
			name: "switch to the device flow",
			setup: func(f *fixture) {
				browserWaiting(f)
				f.run(key("d"))
			},
			want:    []string{"switching to the device flow"},
			notWant: []string{"d device code"},
			check: func(t *testing.T, f *fixture) {
				if r := <-f.requests; r != loginview.RequestDeviceFlow {
					t.Fatalf("request %v", r)
				}
				f.run(key("d"))
				if len(f.requests) != 0 {
					t.Fatal("a second d asked again")
				}
			},
		},
		{
			name: "device code",
			setup: func(f *fixture) {
				browserWaiting(f)
				f.run(key("d"), deviceCodeMsg{uri: "https://dex.example.com:5556/device", code: "WDJB-MJHT", complete: "https://dex.example.com:5556/device?user_code=WDJB-MJHT"},
					stepMsg{"waiting for you to approve the login on the other device"})
			},
			want:    []string{"Open https://dex.example.com:5556/device on any device and enter the code:", "│  WDJB-MJHT  │", "approve the login", "o open browser"},
			notWant: []string{"paste code", "d device code", "switching"},
			check: func(t *testing.T, f *fixture) {
				if f.m.link() != "https://dex.example.com:5556/device?user_code=WDJB-MJHT" {
					t.Fatal(f.m.link())
				}
				f.run(key("p"))
				if f.m.pasting {
					t.Fatal("no pasting in the device flow")
				}
			},
		},
		{
			name: "success",
			setup: func(f *fixture) {
				browserWaiting(f)
				cmds := f.run(successMsg{loginview.Summary{Username: "alice@example.com", Groups: []string{"developers", "admins"},
					Expires: t0.Add(5*time.Minute + 12*time.Second), StoredIn: "the OS keyring"}})
				if len(cmds) != 1 {
					panic("no quit")
				}
			},
			want: []string{"✓ Logged in as alice@example.com", "groups   developers, admins", "valid    until " + t0.Add(5*time.Minute+12*time.Second).Format("15:04:05") + " (5m00s from now)",
				"cached   the OS keyring"},
			notWant: []string{"q cancel", "waiting"},
		},
		{
			// The outcome is printed in plain lines after the screen ends
			// (Login.Finish); the last frame leaves the waiting behind.
			name: "failure",
			setup: func(f *fixture) {
				browserWaiting(f)
				f.run(finishMsg{fmt.Errorf("exchange the authorization code: %w", loginview.ErrLoginDenied)})
			},
			want:    []string{"logging in to"},
			notWant: []string{"q cancel", "waiting", "Log in by visiting"},
		},
		{
			name: "cancelled",
			setup: func(f *fixture) {
				browserWaiting(f)
				f.run(finishMsg{fmt.Errorf("login not completed: %w", ErrCanceled)})
			},
			want:    []string{"logging in to"},
			notWant: []string{"q cancel", "waiting"},
		},
		{
			name:  "60 columns",
			width: 60,
			setup: func(f *fixture) {
				browserWaiting(f)
				f.run(warnMsg{"could not open a browser (exec: \"xdg-open\": executable file not found in $PATH)", "open the link above by hand"})
			},
			want: []string{"o open browser", "q cancel"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.width
			if w == 0 {
				w = 100
			}
			f := newFixture(w)
			tt.setup(f)
			s := f.screen()
			for _, want := range tt.want {
				if !strings.Contains(s, want) {
					t.Errorf("screen lacks %q:\n%s", want, s)
				}
			}
			for _, nw := range tt.notWant {
				if strings.Contains(s, nw) {
					t.Errorf("screen shows %q:\n%s", nw, s)
				}
			}
			for _, l := range strings.Split(f.m.render(), "\n") {
				if lw := lipgloss.Width(l); lw > w {
					t.Errorf("line of %d columns on a %d-column terminal: %q", lw, w, ansi.Strip(l))
				}
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestCtrlCCancelsEvenWhilePasting(t *testing.T) {
	f := newFixture(80)
	browserWaiting(f)
	f.run(key("p"))
	cmds := f.run(key("ctrl+c"))
	if len(cmds) != 1 {
		t.Fatal("ctrl+c while pasting did nothing")
	}
	cmds[0]()
	if !errors.Is(f.canceled, ErrCanceled) {
		t.Fatal(f.canceled)
	}
	if cmds := f.run(key("ctrl+c")); len(cmds) != 0 {
		t.Fatal("a second ctrl+c cancelled twice")
	}
}

func TestPromptEndOnlyClosesItsOwnPrompt(t *testing.T) {
	f := newFixture(80)
	browserWaiting(f)
	f.run(promptEndMsg{make(chan string)})
	if f.m.prompt == nil {
		t.Fatal("a stale prompt end closed the current prompt")
	}
	f.run(promptEndMsg{f.reply})
	if f.m.prompt != nil || strings.Contains(f.screen(), "paste code") {
		t.Fatal("the browser won, but the paste key is still offered")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "dial tcp: i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestNextStep(t *testing.T) {
	var _ net.Error = timeoutErr{}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, "--timeout"},
		{fmt.Errorf("x: %w", loginview.ErrLoginDenied), "right account"},
		{loginview.ErrNoDeviceFlow, "--flow=device"},
		{fmt.Errorf("discover: %w", timeoutErr{}), "reachable"},
		{fmt.Errorf("%w: expired_token", loginview.ErrDeviceLogin), "expired"},
		{errors.New("something else"), "pinniped logout"},
	} {
		if got := NextStep(tt.err); !strings.Contains(got, tt.want) {
			t.Errorf("NextStep(%v) = %q, want it to mention %q", tt.err, got, tt.want)
		}
	}
}

func TestElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{-time.Second: "0s", 7 * time.Second: "7s", 125 * time.Second: "2m05s", 2*time.Hour + 3*time.Minute: "2h03m"} {
		if got := elapsed(d); got != want {
			t.Errorf("elapsed(%v) = %q, want %q", d, got, want)
		}
	}
}
