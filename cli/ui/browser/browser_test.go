package browser

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestOpenRunsBROWSER(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake browser is a shell script")
	}
	dir := t.TempDir()
	got := filepath.Join(dir, "got")
	script := filepath.Join(dir, "fake-browser")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" > "+got+".tmp && mv "+got+".tmp "+got+"\n"), 0o700); err != nil { //nolint:gosec // a test script
		t.Fatal(err)
	}
	for _, c := range []struct{ browser, want string }{
		{script, "https://example.com/a"},
		// %s is replaced, not appended to; an opener that cannot start is skipped.
		{filepath.Join(dir, "missing") + string(os.PathListSeparator) + script + " --url=%s", "--url=https://example.com/a"},
	} {
		_ = os.Remove(got)
		env := func(k string) string {
			if k == "BROWSER" {
				return c.browser
			}
			return ""
		}
		if err := Open(env, "https://example.com/a"); err != nil {
			t.Fatalf("%s: %v", c.browser, err)
		}
		var b []byte
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if b, _ = os.ReadFile(got); len(b) > 0 { //nolint:gosec // the test's own file
				break
			}
		}
		if strings.TrimSpace(string(b)) != c.want {
			t.Errorf("%s: the browser got %q, want %q", c.browser, b, c.want)
		}
	}
	if err := Open(func(string) string { return filepath.Join(dir, "missing") }, "https://example.com"); err == nil || !strings.Contains(err.Error(), "$BROWSER") {
		t.Errorf("a $BROWSER that cannot start: %v", err)
	}
}
