package termsafe

import (
	"errors"
	"io/fs"
	"testing"
)

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode":   "plain text, ünïcode",
		"clear\x1b[2Jscreen":    `clear\x1b[2Jscreen`,
		"over\rwrite":           `over\x0dwrite`,
		"two\nlines\ttab":       `two\x0alines\x09tab`,
		"c1 \u009b31m csi":      `c1 \u009b31m csi`,
		"del\x7f bad\xffutf8":   `del\x7f bad\ufffdutf8`,
		"osc \x1b]0;title\x07.": `osc \x1b]0;title\x07.`,
		// Invisible characters that reorder or hide text: a user code
		// ABCD-\u202eHGFE shows as ABCD-EFGH.
		"ABCD-\u202eHGFE":                       `ABCD-\u202eHGFE`,
		"\u2066isolate\u2069 \u202aembed\u202c": `\u2066isolate\u2069 \u202aembed\u202c`,
		"zero\u200bwidth\u200d\u200e\u200f":     `zero\u200bwidth\u200d\u200e\u200f`,
		"line\u2028para\u2029":                  `line\u2028para\u2029`,
		"bom\ufeff tag\U000e0041":               `bom\ufeff tag\U000e0041`,
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := Lines("a\nb\tc\x1b[2J\r\u2028"), "a\nb\tc\\x1b[2J\\x0d\\u2028"; got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	err := Error(fmtErr{fs.ErrNotExist, "gone\x1b[2J"})
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != `gone\x1b[2J` {
		t.Fatalf("%q, Is=%v", err.Error(), errors.Is(err, fs.ErrNotExist))
	}
	if Error(nil) != nil {
		t.Fatal("Error(nil) is not nil")
	}
}

type fmtErr struct {
	err error
	msg string
}

func (e fmtErr) Error() string { return e.msg }
func (e fmtErr) Unwrap() error { return e.err }
