// Package termsafe makes text from elsewhere (an identity provider's
// error_description, a device code, a cluster's status message) safe to
// print: a control character in it must not drive the terminal (retitle
// it, clear it, move the cursor to overwrite what the CLI said).
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible replaces C0 and C1 control characters and DEL, invisible format
// characters (Unicode category Cf: bidi overrides and isolates, zero-width
// spaces and joiners, which reorder or hide what is shown, so a device
// user code or a URL could read other than it is), line and paragraph
// separators (Zl, Zp), and invalid UTF-8 with Go escapes (\x1b, \u009b,
// \u202e), newlines and tabs included: the text stays on one line.
func Visible(s string) string { return escape(s, false) }

// Lines is Visible but keeps newlines and tabs, for whole messages whose
// own lines are the CLI's (an error with its next step below it).
func Lines(s string) string { return escape(s, true) }

func escape(s string, keepLines bool) string {
	clean := true
	for _, c := range s {
		if unsafe(c, keepLines) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		switch {
		case !unsafe(c, keepLines):
			b.WriteRune(c)
		case c == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case c < 0x80:
			fmt.Fprintf(&b, `\x%02x`, c)
		case c > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, c)
		default:
			fmt.Fprintf(&b, `\u%04x`, c)
		}
	}
	return b.String()
}

func unsafe(c rune, keepLines bool) bool {
	switch {
	case keepLines && (c == '\n' || c == '\t'):
		return false
	case c == utf8.RuneError, c < 0x20, c == 0x7f:
		return true
	}
	return (c >= 0x80 && c < 0xa0) || unicode.In(c, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Error wraps err, whose text carries what another party said, so that
// its text is Visible; errors.Is and errors.As still see err.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return visibleError{err}
}

type visibleError struct{ err error }

func (e visibleError) Error() string { return Visible(e.err.Error()) }
func (e visibleError) Unwrap() error { return e.err }
