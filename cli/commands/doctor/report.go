package doctor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/pinniped-kit/pinniped/cli/ui/termsafe"
)

// Status is a check's outcome.
type Status string

// Outcomes. Only FAIL makes doctor exit non-zero: a WARN is worth knowing
// but does not stop a login, and a SKIP says why a check could not run.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Result is one line of the checklist. Name is stable; Fix is one
// sentence saying what to do (WARN and FAIL only).
type Result struct {
	Name   string `json:"name"`
	Title  string `json:"title"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// Report is the whole checklist for one context.
type Report struct {
	Context string   `json:"context"`
	Checks  []Result `json:"checks"`
}

// Failed counts the checks that failed.
func (r *Report) Failed() int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == Fail {
			n++
		}
	}
	return n
}

// Check is the result named name, or nil.
func (r *Report) Check(name string) *Result {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// Write prints the report as text (one line a check) or JSON.
func (r *Report) Write(w io.Writer, format string) error {
	if format == "json" {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
		_, err := w.Write(termsafe.JSON(buf.Bytes()))
		return err
	}
	if _, err := fmt.Fprintf(w, "pinniped doctor: context %q\n", r.Context); err != nil { // %q escapes control characters
		return err
	}
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	for _, c := range r.Checks {
		text := c.Detail
		if c.Status == Warn || c.Status == Fail {
			text = c.Fix
		}
		if _, err := fmt.Fprintf(w, "%-4s  %-*s  %s: %s\n", c.Status, width, c.Name, c.Title, oneLine(text)); err != nil {
			return err
		}
	}
	return nil
}

// oneLine folds whitespace and makes control characters visible: much of
// what is printed comes from servers (CredentialIssuer messages,
// authenticator conditions, usernames), and an escape sequence in it must
// not drive the terminal (retitle it, clear it, hide lines).
func oneLine(s string) string {
	return termsafe.Visible(strings.Join(strings.Fields(s), " "))
}

// redact replaces every secret (longest first, so one inside another goes
// too) wherever it appears in the report.
func (r *Report) redact(secrets []string) {
	var list []string
	for _, s := range secrets {
		// Very short values would blank out ordinary words.
		if len(strings.TrimSpace(s)) >= 4 {
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return
	}
	sort.Slice(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	pairs := make([]string, 0, 6*len(list))
	for _, s := range list {
		pairs = append(pairs, s, "[redacted]")
		// An error that quoted the secret (%q) or carried it in JSON has it
		// escaped: those forms go too.
		for _, form := range []string{strconv.Quote(s), jsonString(s)} {
			if inner := form[1 : len(form)-1]; inner != s {
				pairs = append(pairs, inner, "[redacted]")
			}
		}
	}
	rep := strings.NewReplacer(pairs...)
	r.Context = rep.Replace(r.Context)
	for i := range r.Checks {
		c := &r.Checks[i]
		c.Title, c.Detail, c.Fix = rep.Replace(c.Title), rep.Replace(c.Detail), rep.Replace(c.Fix)
	}
}

// jsonString is s as a JSON string, quotes included.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
