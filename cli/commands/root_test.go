package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code = Execute(context.Background(), streams, buildinfo.Info{Version: "v1.2.3", Commit: "abc1234", BuildDate: "2026-11-22T00:00:00Z"}, args)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	code, out, errOut := run(t, "version")
	if code != 0 || errOut != "" {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"v1.2.3", "abc1234", "2026-11-22T00:00:00Z", "go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("version output %q lacks %q", out, want)
		}
	}

	code, out, _ = run(t, "version", "-o", "json")
	var info map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info["gitVersion"] != "v1.2.3" || info["goVersion"] == "" {
		t.Fatalf("json version: code %d, output %q", code, out)
	}
}

func TestErrorsGoToStderrWithoutUsageDump(t *testing.T) {
	cases := map[string][]string{
		"bad output":   {"version", "-o", "xml"},
		"unknown flag": {"--bogus"},
		"unknown cmd":  {"frobnicate"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, args...)
			if code == 0 {
				t.Fatal("want a non-zero exit code")
			}
			if out != "" {
				t.Errorf("nothing may reach stdout on error, got %q", out)
			}
			if !strings.HasPrefix(errOut, "Error: ") || strings.Count(errOut, "Error:") != 1 {
				t.Errorf("want exactly one Error: line, got %q", errOut)
			}
			if strings.Contains(errOut, "goroutine") || strings.Contains(errOut, "Usage:") {
				t.Errorf("stderr has a stack trace or usage dump: %q", errOut)
			}
		})
	}
}

func TestHelpAndCompletion(t *testing.T) {
	code, out, _ := run(t, "--help")
	if code != 0 || !strings.Contains(out, "pinniped get kubeconfig") {
		t.Fatalf("help: code %d, %q", code, out)
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, _ := run(t, "completion", shell)
		if code != 0 || len(out) < 100 {
			t.Errorf("completion %s: code %d, %d bytes", shell, code, len(out))
		}
	}
}

// TestDoctorExitsOneAfterTheWholeReport: doctor's failure is one Error
// line on stderr, after the JSON report in full on stdout.
func TestDoctorExitsOneAfterTheWholeReport(t *testing.T) {
	code, out, errOut := run(t, "doctor", "--kubeconfig="+t.TempDir()+"/missing", "-o", "json")
	var r struct {
		Checks []struct{ Name, Status string } `json:"checks"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &r) != nil || len(r.Checks) < 20 || r.Checks[0].Name != "kubeconfig.context" || r.Checks[0].Status != "FAIL" {
		t.Fatalf("code %d\n%s", code, out)
	}
	if strings.Count(errOut, "Error:") != 1 || !strings.Contains(errOut, "checks failed") || strings.Contains(errOut, "goroutine") {
		t.Errorf("stderr %q", errOut)
	}
}
