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
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// EngineName is the engine binary's file name (plus .exe on Windows).
const EngineName = "pinniped-engine"

// FrontPathEnv tells the engine where the front binary is, so the
// kubeconfigs it writes run `pinniped`, not the engine.
const FrontPathEnv = "PINNIPED_CLI_PATH"

// PluginName is the front's name as a kubectl plugin: krew links it into
// its bin directory so, and kubectl runs it for `kubectl pinniped`.
const PluginName = "kubectl-pinniped"

// EnginePath is the engine next to the running front binary (symlinks
// resolved, so a link in ~/bin to an unpacked release works), and the path
// kubeconfigs should run the front by (StablePath).
func EnginePath() (front, engine string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("find the pinniped binary: %w", err)
	}
	exe, engine = EngineBeside(exe, runtime.GOOS)
	if _, err := os.Stat(engine); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("%s is missing: pinniped runs its commands there, and it must sit next to %s. "+
				"Install both binaries from the release archive, or: go install github.com/pinniped-kit/pinniped/cmd/pinniped-engine@<same version>", engine, exe)
		}
		return "", "", fmt.Errorf("engine %s: %w", engine, err)
	}
	return StablePath(os.Args[0], exe), engine, nil
}

// StablePath is the path a kubeconfig should run the front at, given how it
// was started (argv0) and where it really is (resolved). Package managers
// start it through a link whose target moves at each upgrade: krew's
// ~/.krew/bin/kubectl-pinniped points into a directory per version, and
// Homebrew's bin/pinniped into the Caskroom's; a kubeconfig naming the
// target would stop working after the upgrade. So when argv0 (made
// absolute, looked up on PATH if it is a bare name) reaches this very binary
// through a link named as pinniped's front is named, it is the path;
// otherwise the resolved one.
func StablePath(argv0, resolved string) string {
	return stablePath(argv0, resolved, exec.LookPath)
}

func stablePath(argv0, resolved string, lookPath func(string) (string, error)) string {
	path := argv0
	switch {
	case path == "":
		return resolved
	case !strings.ContainsAny(path, `/\`):
		found, err := lookPath(path)
		if err != nil {
			return resolved
		}
		path = found
	}
	path, err := filepath.Abs(path)
	// A link under a name of the user's own (~/bin/pin) would give
	// kubeconfigs a command that doctor, get kubeconfig and pinniped proxy
	// do not take for pinniped's.
	if err != nil || path == resolved || !IsFront(path) {
		return resolved
	}
	if target, err := filepath.EvalSymlinks(path); err != nil || target != resolved {
		return resolved
	}
	return path
}

// EngineBeside is where the front at path looks for the engine on goos:
// path with symlinks resolved (when they resolve), and the engine in its
// directory. It is the rule EnginePath follows, for `pinniped doctor` to
// check a front it is not running.
func EngineBeside(path, goos string) (front, engine string) {
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	name := EngineName
	if goos == "windows" {
		name += ".exe"
	}
	return path, filepath.Join(filepath.Dir(path), name)
}

// IsFront reports whether an exec entry's command runs the pinniped
// front, written as a Unix or a Windows path.
func IsFront(command string) bool {
	base := command
	if i := strings.LastIndexAny(command, `/\`); i >= 0 {
		base = command[i+1:]
	}
	return base == "pinniped" || strings.EqualFold(base, "pinniped.exe") ||
		base == PluginName || strings.EqualFold(base, PluginName+".exe")
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

// FrontPath is the `pinniped` binary kubectl should run: the lean front
// (which answers from the cache and starts this engine when it must), as it
// told us when it handed over; else this binary. Every command that
// writes a kubeconfig running pinniped uses it.
func FrontPath(getenv func(string) string) string {
	if p := getenv(FrontPathEnv); p != "" {
		return p
	}
	exe, err := os.Executable()
	if err != nil {
		return "pinniped"
	}
	exe, _ = filepath.Abs(exe)
	// The engine run by hand: the front beside it, if it is there.
	if strings.TrimSuffix(filepath.Base(exe), ".exe") == EngineName {
		front := filepath.Join(filepath.Dir(exe), strings.Replace(filepath.Base(exe), EngineName, "pinniped", 1))
		if _, err := os.Stat(front); err == nil {
			return front
		}
	}
	return exe
}
