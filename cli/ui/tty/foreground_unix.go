//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package tty

import (
	"os"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Foreground reports whether v is a terminal in whose foreground process
// group this process runs. A process in the background (started with &, or
// sent there with bg) that reads its terminal, or changes its mode, is
// stopped by the kernel (SIGTTIN, SIGTTOU): it must not prompt there.
func Foreground(v any) bool {
	f, ok := v.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) { //nolint:gosec // fd fits in int
		return false
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP) //nolint:gosec // fd fits in int
	return err == nil && pgrp == unix.Getpgrp()
}
