package tui

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"

	"github.com/pinniped-kit/pinniped/cli/ui/loginview"
)

// ErrCanceled is the cause a login ends with when the person cancels it.
var ErrCanceled = errors.New("you cancelled the login; nothing was cached")

// Messages from the login runner (sent by Login) to the model.
type (
	stepMsg       struct{ text string }
	warnMsg       struct{ problem, next string }
	loginURLMsg   struct{ url string }
	browserMsg    struct{ err error }
	deviceCodeMsg struct{ uri, code, complete string }
	promptMsg     struct {
		text  string
		reply chan<- string
	}
	promptEndMsg struct{ reply chan<- string }
	successMsg   struct{ summary loginview.Summary }
	finishMsg    struct{ err error }
)

// loginModel is the login screen. The runner's calls arrive as messages;
// the person's keys go back to the flow as requests, or answer a prompt.
type loginModel struct {
	issuer  string
	now     func() time.Time
	started time.Time
	width   int
	spinner spinner.Model
	input   []rune // the code being pasted or typed

	step  string   // what is happening now
	notes []string // warnings worth keeping on screen (the last few)
	info  string   // the answer to the last key ("opening your browser")

	loginURL      string
	browserOpened bool
	browserFailed bool
	device        *deviceCodeMsg
	prompt        *promptMsg
	pasting       bool
	pasted        bool // the last prompt was answered: if asked again, the paste was refused
	switching     bool
	canceling     bool

	requests chan<- loginview.Request
	cancel   context.CancelCauseFunc
	ready    func() // called from Init: the program owns the terminal

	done   bool
	result *loginview.Summary
	err    error
}

func newLoginModel(issuer string, now func() time.Time, requests chan<- loginview.Request, cancel context.CancelCauseFunc) loginModel {
	if now == nil {
		now = time.Now
	}
	return loginModel{
		issuer: issuer, now: now, started: now(), width: defaultWidth,
		spinner:  spinner.New(spinner.WithSpinner(spinner.MiniDot), spinner.WithStyle(spinnerStyle)),
		step:     "starting",
		requests: requests, cancel: cancel,
	}
}

func (m loginModel) Init() tea.Cmd {
	if m.ready != nil {
		m.ready()
	}
	return m.spinner.Tick
}

func (m loginModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if msg.Width > 0 {
			m.width = msg.Width
		}
		return m, nil
	case spinner.TickMsg:
		if m.done {
			return m, nil
		}
		var cmd tea.Cmd
		m.spinner, cmd = m.spinner.Update(msg)
		return m, cmd
	case stepMsg:
		m.step = msg.text
		return m, nil
	case warnMsg:
		note := msg.problem
		if msg.next != "" {
			note += ": " + msg.next
		}
		m.notes = append(m.notes, note)
		if len(m.notes) > 3 {
			m.notes = m.notes[len(m.notes)-3:]
		}
		return m, nil
	case loginURLMsg:
		m.loginURL = msg.url
		// The full link goes above the screen as ordinary output: the
		// terminal wraps it softly, so it can be selected or clicked whole.
		return m, tea.Println(dimStyle.Render("Login link:") + "\n" + msg.url)
	case browserMsg:
		m.browserOpened, m.browserFailed = msg.err == nil, msg.err != nil
		return m, nil
	case deviceCodeMsg:
		m.device, m.loginURL, m.switching, m.info = &msg, "", false, ""
		m.prompt, m.pasting = nil, false
		m.notes = nil
		if msg.complete != "" {
			return m, tea.Println(dimStyle.Render("Link with the code filled in:") + "\n" + msg.complete)
		}
		return m, nil
	case promptMsg:
		m.prompt = &msg
		if m.pasted { // the flow asks again: the last paste was refused
			m.pasting = true
		}
		return m, nil
	case promptEndMsg:
		if m.prompt != nil && m.prompt.reply == msg.reply {
			m.prompt, m.pasting = nil, false
		}
		return m, nil
	case successMsg:
		m.done, m.result = true, &msg.summary
		return m, tea.Quit
	case finishMsg:
		if !m.done {
			m.done, m.err = true, msg.err
		}
		return m, tea.Quit
	case tea.PasteMsg:
		// A paste (bracketed) while a code is expected is the code.
		if m.prompt != nil && m.device == nil && !m.done {
			m.pasting = true
			m.input = append(m.input, []rune(strings.TrimSpace(msg.Content))...)
		}
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m loginModel) key(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	k := msg.String()
	if k == "ctrl+c" {
		return m.startCancel()
	}
	if m.done {
		return m, nil
	}
	if m.pasting {
		switch k {
		case "esc":
			m.pasting = false
			return m, nil
		case "enter":
			v := strings.TrimSpace(string(m.input))
			if v == "" || m.prompt == nil {
				return m, nil
			}
			select {
			case m.prompt.reply <- v:
			default:
			}
			m.prompt, m.pasting, m.pasted, m.input = nil, false, true, nil
			m.info = "checking the pasted code"
			return m, nil
		case "backspace":
			if len(m.input) > 0 {
				m.input = m.input[:len(m.input)-1]
			}
		case "ctrl+u":
			m.input = nil
		default:
			// Typed characters (and unbracketed pastes, key by key).
			if msg.Text != "" && msg.Mod&^tea.ModShift == 0 {
				m.input = append(m.input, []rune(msg.Text)...)
			}
		}
		return m, nil
	}
	switch k {
	case "q", "esc":
		return m.startCancel()
	case "o":
		if m.loginURL != "" || m.device != nil {
			m.request(loginview.RequestOpenBrowser)
			m.info = "opening your browser"
		}
	case "u":
		if link := m.link(); link != "" {
			m.info = "the link is printed above"
			return m, tea.Println(link)
		}
	case "c":
		if link := m.link(); link != "" {
			// OSC 52: the terminal (also over SSH, and tmux with
			// set-clipboard) puts it on the clipboard of the person's machine.
			m.info = "copied the link (if your terminal allows OSC 52)"
			return m, tea.SetClipboard(link)
		}
	case "p":
		if m.prompt != nil && m.device == nil {
			m.pasting, m.info = true, ""
		}
	case "d":
		if m.loginURL != "" && m.device == nil && !m.switching {
			m.switching = true
			m.request(loginview.RequestDeviceFlow)
			m.info = "switching to the device flow"
		}
	}
	return m, nil
}

// link is what u and c act on: the login link, or the device page.
func (m loginModel) link() string {
	if m.device != nil {
		if m.device.complete != "" {
			return m.device.complete
		}
		return m.device.uri
	}
	return m.loginURL
}

// request asks the flow without blocking the screen: a request the flow
// has not taken yet makes a second one redundant.
func (m loginModel) request(r loginview.Request) {
	select {
	case m.requests <- r:
	default:
	}
}

func (m loginModel) startCancel() (tea.Model, tea.Cmd) {
	if m.canceling || m.done {
		return m, nil
	}
	m.canceling = true
	m.info = "cancelling"
	cancel := m.cancel
	if cancel == nil {
		return m, nil
	}
	// The runner sees the cancelled context, stops, and Login.Finish ends
	// the screen; nothing is cached on that path.
	return m, func() tea.Msg { cancel(ErrCanceled); return nil }
}

func (m loginModel) View() tea.View {
	return tea.NewView(m.render())
}

func (m loginModel) render() string {
	w := m.width
	var b strings.Builder
	b.WriteString(wrap(titleStyle.Render("pinniped")+dimStyle.Render(" · ")+"logging in to "+issuerStyle.Render(m.issuer), w))
	b.WriteString("\n")
	if m.done {
		b.WriteString(m.final(w))
		return b.String()
	}
	b.WriteString(wrap(m.spinner.View()+" "+m.step+dimStyle.Render(" ("+elapsed(m.now().Sub(m.started))+")"), w))
	b.WriteString("\n")
	for _, n := range m.notes {
		b.WriteString(wrap(warnStyle.Render("! "+n), w))
		b.WriteString("\n")
	}
	b.WriteString("\n")
	switch {
	case m.device != nil:
		b.WriteString(wrap("Open "+issuerStyle.Render(m.device.uri)+" on any device and enter the code:", w))
		b.WriteString("\n")
		b.WriteString(indent(codeStyle.Render(m.device.code), "  "))
		b.WriteString("\n")
		if m.device.complete != "" {
			b.WriteString(wrap(dimStyle.Render("or open the link printed above, which fills it in"), w))
			b.WriteString("\n")
		}
	case m.loginURL != "":
		switch {
		case m.browserOpened:
			b.WriteString(wrap("Log in in the browser window that just opened.", w))
		case m.browserFailed:
			b.WriteString(wrap("No browser could be opened here: open the login link printed above on any machine.", w))
		default:
			b.WriteString(wrap("Open the login link printed above in your browser.", w))
		}
		b.WriteString("\n")
	}
	if m.pasting && m.prompt != nil {
		b.WriteString("\n")
		b.WriteString(wrap("Paste the authorization code, or the whole address the browser ended on:", w))
		b.WriteString("\n")
		b.WriteString(m.inputLine(w))
		b.WriteString("\n")
		b.WriteString(help(w, "enter", "submit", "esc", "back", "ctrl+c", "cancel"))
		return b.String()
	}
	if m.info != "" {
		b.WriteString(wrap(dimStyle.Render(m.info), w))
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString(help(w, m.keys()...))
	return b.String()
}

// inputLine shows the end of what was typed, on one line: a pasted redirect
// URL is longer than any terminal, and its end is what was just typed.
func (m loginModel) inputLine(w int) string {
	room := max(w-4, 10)
	v := m.input
	shown := string(v)
	if len(v) > room {
		shown = "…" + string(v[len(v)-room+1:])
	}
	if len(v) == 0 {
		shown = dimStyle.Render("code, or http://127.0.0.1/callback?code=…")
	}
	return keyStyle.Render("> ") + shown + cursorStyle.Render(" ")
}

// keys lists the keys that do something now, so none is shown in vain.
func (m loginModel) keys() []string {
	var k []string
	if m.loginURL != "" || m.device != nil {
		k = append(k, "o", "open browser", "u", "print link", "c", "copy link")
	}
	if m.prompt != nil && m.device == nil {
		k = append(k, "p", "paste code")
	}
	if m.loginURL != "" && m.device == nil && !m.switching {
		k = append(k, "d", "device code")
	}
	return append(k, "q", "cancel")
}

func (m loginModel) final(w int) string {
	switch {
	case m.result != nil:
		s := m.result
		verb := "Logged in"
		if s.Refreshed {
			verb = "Session refreshed"
		}
		who := s.Username
		if who == "" {
			who = "you"
		}
		lines := []string{okStyle.Render("✓ ") + verb + " as " + titleStyle.Render(who)}
		if len(s.Groups) > 0 {
			lines = append(lines, dimStyle.Render("  groups   ")+strings.Join(s.Groups, ", "))
		}
		if !s.Expires.IsZero() {
			lines = append(lines, dimStyle.Render("  valid    ")+"until "+s.Expires.Local().Format("15:04:05")+
				" ("+elapsed(s.Expires.Sub(m.now()))+" from now)")
		}
		lines = append(lines, dimStyle.Render("  cached   ")+s.StoredIn)
		return wrap(strings.Join(lines, "\n"), w) + "\n"
	case m.err != nil:
		// Login.Finish prints the outcome in plain lines once the screen
		// has ended, so it never depends on this frame staying visible.
		return ""
	}
	return ""
}

// NextStep says what a person can do about a failed login.
func NextStep(err error) string {
	var netErr net.Error
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the login took too long. Run the command again (--timeout sets the limit)."
	case errors.Is(err, loginview.ErrLoginDenied):
		return "check that you chose the right account; if you did, ask your administrator for access."
	case errors.Is(err, loginview.ErrNoDeviceFlow):
		return "log in with the browser instead (leave out --flow=device)."
	case errors.As(err, &unknownCA), errors.As(err, &hostErr):
		return "the issuer's certificate is not trusted: get a kubeconfig with its CA from your administrator (pinniped get kubeconfig), or pass --ca-bundle."
	case errors.As(err, &netErr):
		return "check that the identity provider is reachable from this machine (VPN, proxy, DNS), then run the command again."
	case errors.Is(err, loginview.ErrDeviceLogin):
		return "the code may have expired; run the command again for a new one."
	}
	return "run the command again; if it keeps failing, `pinniped logout` clears the cached session."
}

// elapsed formats a duration in whole seconds: "7s", "2m05s".
func elapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d.Round(time.Second).Seconds())
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	if s < 3600 {
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, (s%3600)/60)
}

var _ tea.Model = loginModel{}
