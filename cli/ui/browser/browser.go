// Package browser opens a URL in the person's browser. It is a leaf of
// its own, not part of a UI form, because the Factory (cmdutil) holds the
// opener every command uses, and both login forms (plain and tui) fall
// back to it, so all of them open browsers the same way.
package browser

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/pkg/browser"
)

// Open opens url in a browser: $BROWSER first (as many tools honour it),
// else the platform's opener. getenv nil means os.Getenv.
func Open(getenv func(string) string, url string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	if b := getenv("BROWSER"); b != "" {
		var lastErr error
		for _, cmdline := range strings.Split(b, string(os.PathListSeparator)) {
			args := strings.Fields(cmdline)
			if len(args) == 0 {
				continue
			}
			substituted := false
			for i, a := range args {
				if strings.Contains(a, "%s") {
					args[i] = strings.ReplaceAll(a, "%s", url)
					substituted = true
				}
			}
			if !substituted {
				args = append(args, url)
			}
			// The browser must outlive this process, so no context.
			cmd := exec.Command(args[0], args[1:]...) //nolint:gosec,noctx // the user's own $BROWSER
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
			if lastErr = cmd.Start(); lastErr == nil {
				go func() { _ = cmd.Wait() }()
				return nil
			}
		}
		return fmt.Errorf("$BROWSER: %w", lastErr)
	}
	// pkg/browser copies the opener's output to its Stdout, which must not
	// be ours: stdout carries only the ExecCredential.
	browser.Stdout, browser.Stderr = io.Discard, io.Discard
	return browser.OpenURL(url)
}
