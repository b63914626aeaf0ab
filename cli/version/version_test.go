package version_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pinniped-kit/pinniped/cli/version"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := version.NewCommand("pinniped", version.Info{Version: "v1.2.3", Commit: "abc1234", BuildDate: "2026-11-23T12:00:00Z"})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.Execute()
	return out.String(), err
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
