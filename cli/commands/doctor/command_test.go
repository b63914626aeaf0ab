package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/pinniped-kit/pinniped/cli/cmdutil"
)

func TestFlags(t *testing.T) {
	for args, wantErr := range map[string]string{
		"-o=yaml":                  `-o "yaml": use text or json`,
		"--timeout=0s":             "--timeout must be positive",
		"extra":                    `unknown command "extra"`,
		"--kubeconfig":             "flag needs an argument",
		"--api-group-suffix=nodot": "--api-group-suffix",
		"--context=dev":            "",
	} {
		var got *Options
		cmd := NewCmdDoctor(cmdutil.Test(nil, &bytes.Buffer{}, &bytes.Buffer{}, nil), func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs([]string{args})
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.Execute()
		if wantErr == "" {
			if err != nil || got == nil || got.Kube.Context() != "dev" || got.Output != "text" || got.Doctor.Timeout != 10*time.Second {
				t.Errorf("%s: %v %+v", args, err, got)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) || got != nil {
			t.Errorf("%s: %v, want %q", args, err, wantErr)
		}
	}
	// Every check is named in --help.
	var help bytes.Buffer
	cmd := NewCmdDoctor(cmdutil.Test(nil, &help, &help, nil), nil)
	cmd.SetArgs([]string{"--help"})
	cmd.SetOut(&help)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if !strings.Contains(help.String(), "  "+c.name+" ") {
			t.Errorf("--help does not name %s", c.name)
		}
		if !strings.Contains(string(doc), "//\t"+c.name+" ") {
			t.Errorf("the package doc does not name %s", c.name)
		}
	}
}

// TestJSONInFullThenError: a failing check still prints the whole JSON
// report, and only then returns the error.
func TestJSONInFullThenError(t *testing.T) {
	b := newBed(t)
	b.api.tcr = 404
	out, err := b.run("-o", "json")
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "1 of 23 checks failed") {
		t.Fatalf("%v", err)
	}
	var r struct {
		Context string `json:"context"`
		Checks  []struct {
			Name, Title, Status, Detail, Fix string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Context != "dev" || len(r.Checks) != len(checks) {
		t.Fatalf("%v %s", err, out)
	}
	var raw map[string][]map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	for _, field := range []string{"name", "title", "status"} {
		if _, ok := raw["checks"][0][field]; !ok {
			t.Errorf("no %q in %v", field, raw["checks"][0])
		}
	}
}

func TestSame(t *testing.T) {
	v1 := Build{Version: "v1.0.0", Revision: "aaa"}
	for _, tc := range []struct {
		a, b        Build
		equal, told bool
	}{
		{v1, v1, true, true},
		{v1, Build{Version: "v1.0.1", Revision: "bbb"}, false, true},
		{v1, Build{Version: "v1.0.0", Revision: "aaa", Modified: true}, false, true},
		{Build{Version: "v1.0.0+dirty", Revision: "aaa", Modified: true}, Build{Version: "v1.0.0+dirty", Revision: "aaa", Modified: true}, true, false},
		{Build{Version: "v1.0.0"}, Build{Version: "v1.0.0"}, true, true},
		{Build{}, v1, false, false},
		{Build{GoVersion: "go1.25.0"}, Build{GoVersion: "go1.25.0"}, false, false},
		{Build{GoVersion: "go1.25.0"}, Build{GoVersion: "go1.25.1"}, false, true},
		// One commit, two flavours: not one build.
		{v1, Build{Version: "v1.0.0", Revision: "aaa", FIPSModule: "v1.0.0-c2097c7c"}, false, true},
		{Build{Revision: "aaa", FIPSModule: "v1.0.0-c2097c7c"}, Build{Revision: "aaa", FIPSModule: "v1.0.0-c2097c7c"}, true, true},
	} {
		if equal, told := same(tc.a, tc.b); equal != tc.equal || told != tc.told {
			t.Errorf("same(%v, %v) = %v, %v", tc.a, tc.b, equal, told)
		}
	}
	if s := (Build{Version: "v1.0.0", Revision: "0123456789abcdef", Modified: true}).String(); s != "v1.0.0, commit 0123456789ab, with local changes" {
		t.Error(s)
	}
}

func TestSkew(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	// Date is truncated to the second: a server in step reads up to a second earlier.
	// A Date header is good to a second.
	if s := skewOf(now.Add(-400*time.Millisecond).Truncate(time.Second), now, now.Add(200*time.Millisecond)); s.Abs() > time.Second {
		t.Errorf("in step: %v", s)
	}
	if s := skewOf(now.Add(2*time.Minute+300*time.Millisecond).Truncate(time.Second), now, now.Add(100*time.Millisecond)); (s - 2*time.Minute).Abs() > time.Second {
		t.Errorf("ahead: %v", s)
	}
	for s, want := range map[time.Duration]Status{0: OK, 30 * time.Second: OK, 31 * time.Second: Warn, -3 * time.Minute: Warn, -181 * time.Second: Fail} {
		if got := judgeSkew(s); got != want {
			t.Errorf("%v: %s, want %s", s, got, want)
		}
	}
}

func TestSummarise(t *testing.T) {
	admin := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}}
	s, useful := summarise("default", admin)
	if !useful || !strings.Contains(s, "cluster-admin-like (*): yes") || !strings.Contains(s, "list secrets: yes") {
		t.Error(s)
	}
	self := authorizationv1.SubjectRulesReviewStatus{Incomplete: true, EvaluationError: "webhook unreachable", ResourceRules: []authorizationv1.ResourceRule{
		{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"one"}},
	}}
	s, useful = summarise("team", self)
	if useful != true || !strings.Contains(s, "in namespace team: 2 resource rules") || !strings.Contains(s, "list pods: no") ||
		!strings.Contains(s, "cluster-admin-like (*): no") || !strings.Contains(s, "incomplete: webhook unreachable") {
		t.Error(s)
	}
	s, useful = summarise("team", authorizationv1.SubjectRulesReviewStatus{ResourceRules: self.ResourceRules[:1]})
	if useful {
		t.Errorf("only self-review rules are useful: %s", s)
	}
}

// TestReadBuild reads a real binary (this test's) without running it.
func TestReadBuild(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	b, err := ReadBuild(exe)
	if err != nil || b.GoVersion != runtime.Version() {
		t.Fatalf("%+v %v", b, err)
	}
	if _, err := ReadBuild(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing binary was read")
	}
}
