package handoff

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEngineBeside(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	if err := os.MkdirAll(release, 0o700); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(release, "pinniped")
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "pinniped")
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	// A link in ~/bin to an unpacked release finds the release's engine.
	front, engine := EngineBeside(link, "linux")
	if front != real || engine != filepath.Join(release, "pinniped-engine") {
		t.Errorf("%s, %s", front, engine)
	}
	if _, engine := EngineBeside(filepath.Join(dir, "missing", "pinniped.exe"), "windows"); engine != filepath.Join(dir, "missing", "pinniped-engine.exe") {
		t.Errorf("%s", engine)
	}
}

// TestKrewInstall: krew unpacks the release into a versioned store and
// links only the named binary into its bin directory as kubectl-pinniped.
// The engine is found beside the real front, and kubeconfigs name the
// link, which survives krew upgrades (the store's directory does not).
func TestKrewInstall(t *testing.T) {
	root := t.TempDir()
	store := filepath.Join(root, "store", "pinniped", "v0.1.0")
	bin := filepath.Join(root, "bin")
	for _, d := range []string{store, bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	real := filepath.Join(store, "pinniped")
	for _, f := range []string{real, filepath.Join(store, EngineName)} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(bin, PluginName)
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	resolved, engine := EngineBeside(link, "linux")
	if resolved != real || engine != filepath.Join(store, EngineName) {
		t.Fatalf("beside the link: %s, %s", resolved, engine)
	}
	if got := StablePath(link, resolved); got != link {
		t.Errorf("kubectl pinniped (krew): kubeconfigs would run %s, want the link %s", got, link)
	}
	if !IsFront(link) || !IsFront(`C:\krew\bin\kubectl-pinniped.exe`) {
		t.Error("the krew link is not taken for the front")
	}
	other := filepath.Join(bin, "elsewhere")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for argv0, why := range map[string]string{
		"kubectl-pinniped":                 "a relative argv[0]",
		filepath.Join(root, "pinniped"):    "not the plugin's name",
		filepath.Join(bin, "kubectl-nope"): "another plugin's name",
	} {
		if got := StablePath(argv0, resolved); got != resolved {
			t.Errorf("%s (%s): %s, want the resolved path", argv0, why, got)
		}
	}
	// A kubectl-pinniped that is not this binary is not trusted for it.
	stale := filepath.Join(t.TempDir(), PluginName)
	if err := os.Symlink(other, stale); err != nil {
		t.Fatal(err)
	}
	if got := StablePath(stale, resolved); got != resolved {
		t.Errorf("a link to another binary: %s", got)
	}
}
