package buildinfo

import "testing"

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
