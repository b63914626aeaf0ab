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
