package command

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pinniped-kit/pinniped/agent/apis/buildinfo"
)

func TestVersionAndErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	info := buildinfo.Info{Version: "v9.9.9", Commit: "deadbee"}
	if code := Execute(context.Background(), &out, &errOut, info, []string{"version", "-o", "json"}); code != 0 {
		t.Fatalf("code %d, stderr %q", code, errOut.String())
	}
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got["gitVersion"] != "v9.9.9" || got["gitCommit"] != "deadbee" || got["goVersion"] == "" {
		t.Fatalf("version -o json: %q (%v)", out.String(), err)
	}

	// The old --json still works; its notice goes to stderr, never into
	// the JSON on stdout.
	out.Reset()
	if code := Execute(context.Background(), &out, &errOut, info, []string{"version", "--json"}); code != 0 {
		t.Fatalf("version --json: code %d, stderr %q", code, errOut.String())
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || !strings.Contains(errOut.String(), "--json has been deprecated, use -o json") {
		t.Fatalf("version --json: stdout %q (%v), stderr %q", out.String(), err, errOut.String())
	}

	out.Reset()
	errOut.Reset()
	if code := Execute(context.Background(), &out, &errOut, info, []string{"--nope"}); code == 0 {
		t.Fatal("unknown flag must fail")
	}
	if !strings.Contains(errOut.String(), "unknown flag: --nope") || out.Len() != 0 {
		t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
	}
}
