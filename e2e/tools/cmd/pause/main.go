// Command pause is the test bed's pod sandbox ("pause") image binary: it holds the pod's
// namespaces open until it is told to stop. Kubernetes' own pause is C; this one is a
// static Go binary so that the image can be built without docker or a C toolchain.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of the sandbox it must also reap children that get re-parented to it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
