// Package handoff runs the pinniped engine: the binary with every command
// (logins, install, get kubeconfig, ...) beside the lean `pinniped` front,
// which answers only cache hits itself. The engine gets the same arguments,
// environment and terminal, so the hand-off is invisible to kubectl and to
// people.
package handoff

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// EngineName is the engine binary's file name (plus .exe on Windows).
const EngineName = "pinniped-engine"

// FrontPathEnv tells the engine where the front binary is, so the
// kubeconfigs it writes run `pinniped`, not the engine.
const FrontPathEnv = "PINNIPED_CLI_PATH"

// EnginePath is the engine next to the running front binary (symlinks
// resolved, so a link in ~/bin to an unpacked release works).
func EnginePath() (front, engine string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("find the pinniped binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	name := EngineName
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	engine = filepath.Join(filepath.Dir(exe), name)
	if _, err := os.Stat(engine); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("%s is missing: pinniped runs its commands there, and it must sit next to %s. "+
				"Install both binaries from the release archive, or: go install github.com/pinniped-kit/pinniped/cmd/pinniped-engine@<same version>", engine, exe)
		}
		return "", "", fmt.Errorf("engine %s: %w", engine, err)
	}
	return exe, engine, nil
}

// Run replaces the process with the engine (on Unix; elsewhere it waits for
// it) and returns only on failure, with the exit code to use.
func Run(args []string) int {
	front, engine, err := EnginePath()
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		return 1
	}
	env := append(os.Environ(), FrontPathEnv+"="+front)
	return run(engine, args, env)
}
