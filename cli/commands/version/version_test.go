package version_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
	"github.com/pinniped-kit/pinniped/cli/cmdutil"
	"github.com/pinniped-kit/pinniped/cli/commands/version"
)

// run runs the command with its own Run, on a test Factory holding a fixed
// build; stdout and stderr share the returned text.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	f := cmdutil.Test(strings.NewReader(""), &out, &out, nil)
	f.Version = buildinfo.Info{Version: "v1.2.3", Commit: "abc1234", BuildDate: "2026-11-23T12:00:00Z"}
	cmd := version.NewCmdVersion(f, nil)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	return out.String(), err
}

// parse runs the command with a runF that keeps the options, to check
// flag parsing alone.
func parse(t *testing.T, args ...string) (*version.Options, error) {
	t.Helper()
	var got *version.Options
	f := cmdutil.Test(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, nil)
	cmd := version.NewCmdVersion(f, func(_ context.Context, o *version.Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	return got, cmd.Execute()
}

func TestVersionFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"-o", "json"}, "json"},
		{[]string{"--output=yaml"}, "yaml"},
		{[]string{"--json"}, "json"},
		{[]string{"--json", "-o", "json"}, "json"},
	} {
		o, err := parse(t, c.args...)
		if err != nil || o == nil || o.Output != c.want {
			t.Errorf("%q: %+v %v, want -o %q", c.args, o, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "xml"}, "use json or yaml"},
		{[]string{"--json", "-o", "yaml"}, "--json and -o yaml disagree"},
		{[]string{"extra"}, "unknown command"},
		{[]string{"--nope"}, "unknown flag"},
	} {
		if o, err := parse(t, c.args...); err == nil || o != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %+v %v, want an error saying %q", c.args, o, err, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t)
	if err != nil || !strings.HasPrefix(out, "v1.2.3 (commit abc1234, built 2026-11-23T12:00:00Z, go") {
		t.Fatalf("%q %v", out, err)
	}
	for _, format := range []string{"json", "yaml"} {
		out, err := run(t, "-o", format)
		var got map[string]string
		if err == nil {
			if format == "json" {
				err = json.Unmarshal([]byte(out), &got)
			} else {
				err = yaml.Unmarshal([]byte(out), &got)
			}
		}
		// Upstream Pinniped's field names (Kubernetes' version.Info).
		want := map[string]string{"major": "1", "minor": "2", "gitVersion": "v1.2.3", "gitCommit": "abc1234", "gitTreeState": "clean",
			"buildDate": "2026-11-23T12:00:00Z", "compiler": "gc"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("-o %s: %s = %q, want %q (%v)", format, k, got[k], v, err)
			}
		}
		if got["goVersion"] == "" || got["platform"] == "" || len(got) != 9 {
			t.Errorf("-o %s: %q", format, out)
		}
	}
	if _, err := run(t, "-o", "xml"); err == nil || !strings.Contains(err.Error(), "use json or yaml") {
		t.Errorf("-o xml: %v", err)
	}
}

// TestLegacyJSONKeepsStdoutJSON: the old --json prints the JSON alone on
// stdout, as scripts read it, and its deprecation notice on stderr.
func TestLegacyJSONKeepsStdoutJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	f := cmdutil.Test(strings.NewReader(""), &stdout, &stderr, nil)
	cmd := version.NewCmdVersion(f, nil)
	cmd.SetArgs([]string{"--json"})
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got["gitVersion"] != "v0.0.0-test" {
		t.Fatalf("stdout is not the JSON alone: %q (%v)", stdout.String(), err)
	}
	if !strings.Contains(stderr.String(), "--json has been deprecated, use -o json") {
		t.Fatalf("stderr %q", stderr.String())
	}
}
