package termsafe

import (
	"encoding/json"
	"errors"
	"io/fs"
	"reflect"
	"strings"
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

// unsafeWide lists characters JSON and YAML encoders leave raw that must
// not reach a terminal so: C1 (CSI, NEL), DEL, bidi overrides, zero-width,
// line and paragraph separators, a BOM and a supplementary tag character.
const unsafeWide = "\u009b31m\u0085\x7f\u202eevil\u2066\u200b\u2028\u2029\ufeff\U000e0041"

func TestJSON(t *testing.T) {
	in := map[string][]string{"key" + unsafeWide: {"value" + unsafeWide, "plain ünïcode", "c0 \x1b[2J\r\n"}}
	raw, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(raw)
	var back map[string][]string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("not JSON any more: %v\n%s", err, got)
	}
	if !reflect.DeepEqual(back, in) {
		t.Errorf("decodes to %q, want %q", back, in)
	}
	if i := strings.IndexFunc(string(got), func(c rune) bool { return c == 0x7f || c >= 0x80 && Visible(string(c)) != string(c) }); i >= 0 {
		t.Errorf("raw unsafe character at %d: %q", i, got)
	}
	if !strings.Contains(string(got), `\u009b31m`) || !strings.Contains(string(got), `\udb40\udc41`) || !strings.Contains(string(got), "plain ünïcode") {
		t.Errorf("want \\u escapes, surrogate pairs beyond U+FFFF, other text as it was: %s", got)
	}
}

func TestBeyondASCII(t *testing.T) {
	if got, want := BeyondASCII("a\x1b\u009b\u202eü"), "a\x1b\\u009b\\u202eü"; got != want {
		t.Errorf("BeyondASCII = %q, want %q", got, want)
	}
	in := []string{"a\u202e", "b"}
	if got := VisibleAll(in); !reflect.DeepEqual(got, []string{`a\u202e`, "b"}) || in[0] != "a\u202e" {
		t.Errorf("VisibleAll = %q (input now %q)", got, in)
	}
}
