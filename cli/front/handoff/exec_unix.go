//go:build !windows

package handoff

import (
	"fmt"
	"os"
	"syscall"
)

// run execs the engine in place: same process, terminal and signals.
func run(engine string, args, env []string) int {
	err := syscall.Exec(engine, append([]string{engine}, args...), env) //nolint:gosec // the engine beside this binary, by design
	fmt.Fprintf(os.Stderr, "Error: start %s: %v\n", engine, err)
	return 1
}
