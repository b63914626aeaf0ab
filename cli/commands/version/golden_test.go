package version_test

import (
	"runtime"
	"strings"
	"testing"
)

// TestOutputBytes pins -o json and -o yaml byte for byte: scripts written
// for upstream Pinniped parse them.
func TestOutputBytes(t *testing.T) {
	goVersion, platform := runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
	want := map[string]string{
		"json": `{
  "major": "1",
  "minor": "2",
  "gitVersion": "v1.2.3",
  "gitCommit": "abc1234",
  "gitTreeState": "clean",
  "buildDate": "2026-11-23T12:00:00Z",
  "goVersion": "` + goVersion + `",
  "compiler": "` + runtime.Compiler + `",
  "platform": "` + platform + `"
}
`,
		"yaml": `buildDate: "2026-11-23T12:00:00Z"
compiler: ` + runtime.Compiler + `
gitCommit: abc1234
gitTreeState: clean
gitVersion: v1.2.3
goVersion: ` + goVersion + `
major: "1"
minor: "2"
platform: ` + platform + `
`,
		"": "v1.2.3 (commit abc1234, built 2026-11-23T12:00:00Z, " + goVersion + ", " + platform + ")\n",
	}
	for format, w := range want {
		args := []string{"-o", format}
		if format == "" {
			args = nil
		}
		got, err := run(t, args...)
		if err != nil || got != w {
			t.Errorf("-o %q: got\n%s\nwant\n%s\n(%v)", format, got, w, err)
		}
	}
	// The deprecation notice comes first (run shares stdout and stderr).
	if got, err := run(t, "--json"); err != nil || !strings.HasSuffix(got, "\n"+want["json"]) {
		t.Errorf("--json: got\n%s\n(%v)", got, err)
	}
}
