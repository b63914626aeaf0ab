package tui

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
)

// ErrNoChoice means the person left the chooser without choosing.
var ErrNoChoice = errors.New("nothing chosen")

type chooseModel struct {
	title    string
	items    []string
	cursor   int
	chosen   int // -1 until enter
	canceled bool
	width    int
}

func newChooseModel(title string, items []string) chooseModel {
	return chooseModel{title: title, items: items, chosen: -1, width: defaultWidth}
}

func (m chooseModel) Init() tea.Cmd { return nil }

func (m chooseModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if msg.Width > 0 {
			m.width = msg.Width
		}
	case tea.KeyPressMsg:
		switch k := msg.String(); k {
		case "up", "k", "shift+tab":
			m.cursor = (m.cursor - 1 + len(m.items)) % len(m.items)
		case "down", "j", "tab":
			m.cursor = (m.cursor + 1) % len(m.items)
		case "enter", "space":
			m.chosen = m.cursor
			return m, tea.Quit
		case "q", "esc", "ctrl+c":
			m.canceled = true
			return m, tea.Quit
		default:
			// The item's number, as in the plain prompt.
			if n, err := strconv.Atoi(k); err == nil && n >= 1 && n <= len(m.items) {
				m.chosen = n - 1
				return m, tea.Quit
			}
		}
	}
	return m, nil
}

func (m chooseModel) View() tea.View { return tea.NewView(m.render()) }

func (m chooseModel) render() string {
	w := m.width
	var b strings.Builder
	switch {
	case m.chosen >= 0:
		return wrap(okStyle.Render("✓ ")+m.title+" "+issuerStyle.Render(m.items[m.chosen]), w) + "\n"
	case m.canceled:
		return wrap(errStyle.Render("✗ ")+m.title+" "+dimStyle.Render("(nothing chosen)"), w) + "\n"
	}
	b.WriteString(wrap(titleStyle.Render(m.title), w))
	b.WriteString("\n")
	for i, it := range m.items {
		line := fmt.Sprintf("  %d) %s", i+1, it)
		if i == m.cursor {
			line = issuerStyle.Render(fmt.Sprintf("› %d) %s", i+1, it))
		}
		b.WriteString(wrap(line, w))
		b.WriteString("\n")
	}
	b.WriteString(help(w, "↑/↓", "move", "enter", "choose", "q", "cancel"))
	return b.String()
}

// Choose asks the person at the terminal to pick one of items (arrows and
// enter, or the item's number). It returns the index, or ErrNoChoice.
func Choose(in io.Reader, out io.Writer, title string, items []string) (int, error) {
	return choose(in, out, title, items)
}

func choose(in io.Reader, out io.Writer, title string, items []string, opts ...tea.ProgramOption) (int, error) {
	if len(items) == 0 {
		return 0, ErrNoChoice
	}
	p := tea.NewProgram(newChooseModel(title, items),
		append([]tea.ProgramOption{tea.WithInput(in), tea.WithOutput(out), tea.WithoutSignalHandler()}, opts...)...)
	final, err := p.Run()
	if err != nil {
		return 0, fmt.Errorf("show the chooser: %w", err)
	}
	m, ok := final.(chooseModel)
	if !ok || m.chosen < 0 {
		return 0, ErrNoChoice
	}
	return m.chosen, nil
}
