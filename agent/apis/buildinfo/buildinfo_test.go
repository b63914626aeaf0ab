package buildinfo

import (
	"strings"
	"testing"
)

func TestCompleteAndUpstream(t *testing.T) {
	i := Info{}.Complete()
	if i.Version != "dev" || i.Commit != "unknown" || i.GoVersion == "" || i.Platform == "" {
		t.Fatalf("%+v", i)
	}
	if u := i.Upstream(); u.Major != "" || u.GitTreeState != "clean" {
		t.Errorf("dev build: %+v", u)
	}
	u := Info{Version: "v0.7.1-3-gabc-dirty"}.Upstream()
	if u.Major != "0" || u.Minor != "7" || u.GitTreeState != "dirty" {
		t.Errorf("dirty build: %+v", u)
	}
}

// TestFIPSInTheOneLineOnly: the FIPS mode is named in the human line and
// nowhere in upstream's shape; an ordinary test binary is not in it.
func TestFIPSInTheOneLineOnly(t *testing.T) {
	if got := FIPS(); got != "" {
		t.Fatalf("an ordinary test binary reports FIPS mode %q: is GODEBUG=fips140 set?", got)
	}
	i := Info{Version: "v1.2.3", Commit: "abc", GoVersion: "go1.26.8", Platform: "linux/amd64", FIPS: "FIPS 140-3 mode, Go module v1.0.0, enforced"}
	if got, want := i.String(), "v1.2.3 (commit abc, go1.26.8, linux/amd64, FIPS 140-3 mode, Go module v1.0.0, enforced)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	var b strings.Builder
	if err := i.Write(&b, "json"); err != nil || strings.Contains(b.String(), "FIPS") || strings.Contains(b.String(), "fips") {
		t.Errorf("-o json names FIPS (upstream's fields only): %s %v", b.String(), err)
	}
}
