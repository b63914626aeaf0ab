//go:build windows

package handoff

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
)

// run starts the engine with this process's console and waits: Windows has
// no exec. Ctrl+C reaches both processes; this one waits for the engine's
// exit code instead of dying first.
func run(engine string, args, env []string) int {
	signal.Ignore(os.Interrupt)
	cmd := exec.Command(engine, args...) //nolint:gosec // the engine beside this binary, by design
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: start %s: %v\n", engine, err)
		return 1
	}
	return 0
}
