package handoff

import (
	"os"
	"os/exec"
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
// Homebrew links bin/pinniped to the cask's directory of this version, which
// brew upgrade removes: kubeconfigs name the link.
func TestHomebrewInstall(t *testing.T) {
	root := t.TempDir()
	cask := filepath.Join(root, "Caskroom", "pinniped", "1.2.3")
	bin := filepath.Join(root, "bin")
	for _, d := range []string{cask, bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	real := filepath.Join(cask, "pinniped")
	if err := os.WriteFile(real, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(bin, "pinniped")
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	resolved, _ := EngineBeside(link, "linux")
	onPath := func(string) (string, error) { return link, nil }
	for _, argv0 := range []string{link, "pinniped"} {
		if got := stablePath(argv0, resolved, onPath); got != link {
			t.Errorf("started as %q: kubeconfigs would run %s, want the link %s", argv0, got, link)
		}
	}
	// Started by its own path, the binary is named by it.
	if got := stablePath(real, resolved, onPath); got != real {
		t.Errorf("started as %s: %s", real, got)
	}
	// A link of the user's own naming is not a name kubeconfigs can use.
	own := filepath.Join(bin, "pin")
	if err := os.Symlink(real, own); err != nil {
		t.Fatal(err)
	}
	if got := stablePath(own, resolved, onPath); got != real {
		t.Errorf("started as %s: %s, want the binary's own path", own, got)
	}
}

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
	noPath := func(string) (string, error) { return "", exec.ErrNotFound }
	for argv0, why := range map[string]string{
		"kubectl-pinniped":              "a bare name not on PATH",
		filepath.Join(root, "pinniped"): "a path that is not there",
		other:                           "another binary",
		"":                              "no argv[0]",
	} {
		if got := stablePath(argv0, resolved, noPath); got != resolved {
			t.Errorf("%q (%s): %s, want the resolved path", argv0, why, got)
		}
	}
	// kubectl starts plugins by their absolute path; a shell by the bare
	// name it found on PATH: either way, the link.
	onPath := func(name string) (string, error) { return filepath.Join(bin, name), nil }
	if got := stablePath(PluginName, resolved, onPath); got != link {
		t.Errorf("kubectl-pinniped found on PATH: %s, want the link %s", got, link)
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
