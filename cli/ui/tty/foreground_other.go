//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package tty

// Foreground reports whether v is a terminal this process may prompt on.
// Without job control there is no background to be stopped in.
func Foreground(v any) bool { return IsTerminal(v) }
