// Package tui is the interactive terminal UI of pinniped: the login screen
// (Login, a loginview.View), the progress of long waits
// (Steps) and a chooser (Choose). It renders with bubbletea inline, never in
// the alternate screen, so a full-screen caller such as k9s keeps its
// screen, and only on the terminal (stderr), never on stdout, which carries
// the credential for kubectl.
//
// Nothing here touches the terminal until a program is started: package
// initialisation only builds styles, and lipgloss v2 styles do not query
// the terminal (colours are downsampled when a program renders).
package tui

import (
	"strings"

	"charm.land/lipgloss/v2"
)

// Colours are ANSI palette indexes, so they follow the person's terminal
// theme; no background-colour query is needed to stay readable.
var (
	accent  = lipgloss.Color("6") // cyan
	success = lipgloss.Color("2")
	failure = lipgloss.Color("1")
	warning = lipgloss.Color("3")

	titleStyle   = lipgloss.NewStyle().Bold(true)
	issuerStyle  = lipgloss.NewStyle().Foreground(accent)
	dimStyle     = lipgloss.NewStyle().Faint(true)
	okStyle      = lipgloss.NewStyle().Foreground(success).Bold(true)
	errStyle     = lipgloss.NewStyle().Foreground(failure).Bold(true)
	warnStyle    = lipgloss.NewStyle().Foreground(warning)
	keyStyle     = lipgloss.NewStyle().Bold(true)
	spinnerStyle = lipgloss.NewStyle().Foreground(accent)
	cursorStyle  = lipgloss.NewStyle().Reverse(true)
	codeStyle    = lipgloss.NewStyle().Bold(true).Padding(0, 2).
			Border(lipgloss.RoundedBorder()).BorderForeground(accent)
)

// defaultWidth is used until the terminal reports its size.
const defaultWidth = 80

// wrap fits s into width columns, breaking long words (URLs) where needed.
// The renderer would otherwise cut lines at the edge of the terminal.
func wrap(s string, width int) string {
	if width < 20 {
		width = 20
	}
	return lipgloss.Wrap(s, width, " /&?=-")
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// help renders key hints ("o open browser · q cancel") wrapped to width.
func help(width int, pairs ...string) string {
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		parts = append(parts, keyStyle.Render(pairs[i])+" "+dimStyle.Render(pairs[i+1]))
	}
	var lines []string
	line := ""
	sep := dimStyle.Render(" · ")
	for _, p := range parts {
		switch {
		case line == "":
			line = p
		case lipgloss.Width(line+sep+p) > width:
			lines = append(lines, line)
			line = p
		default:
			line += sep + p
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
