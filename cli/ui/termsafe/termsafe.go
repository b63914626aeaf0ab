// Package termsafe makes text from elsewhere (an identity provider's
// error_description, a device code, a cluster's status message) safe to
// print: a control character in it must not drive the terminal (retitle
// it, clear it, move the cursor to overwrite what the CLI said).
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
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

// VisibleAll is Visible of each value, in a new slice.
func VisibleAll(values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = Visible(v)
	}
	return out
}

// BeyondASCII escapes, as Visible does, only the unsafe characters beyond
// ASCII (C1 controls, Cf, Zl, Zp, invalid UTF-8), for text an encoder then
// writes with its own escapes for ASCII controls but leaves these raw.
func BeyondASCII(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= utf8.RuneSelf && unsafe(c, false) {
			b.WriteString(escape(string(c), false))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// JSON escapes in encoded JSON what encoding/json leaves raw but a
// terminal must not see raw: C1 controls (U+009B opens an escape sequence
// on many terminals), DEL, Cf, Zl and Zp, and invalid UTF-8. It writes
// them as JSON's \u escapes, so the result is still valid JSON and decodes
// to the same values. Outside strings JSON is ASCII without DEL, so each
// such character is inside a string, where an escape reads back as itself.
func JSON(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		c, n := utf8.DecodeRune(b[i:])
		if c != 0x7f && (c < utf8.RuneSelf || !unsafe(c, false)) {
			out = append(out, b[i:i+n]...)
			i += n
			continue
		}
		if c > 0xffff {
			r1, r2 := utf16.EncodeRune(c)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, c)
		}
		i += n
	}
	return out
}

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
