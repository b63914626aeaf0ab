// Command pinniped is the CLI people and kubectl run. It is deliberately
// tiny: kubectl starts it before nearly every request, and the only answer
// needed then is a cached credential, which it gives by itself. For
// everything else it hands over to pinniped-engine beside it (same
// arguments, environment and terminal).
package main

import (
	"os"

	"github.com/pinniped-kit/pinniped/cli/front/fastlogin"
	"github.com/pinniped-kit/pinniped/cli/front/handoff"
)

func main() {
	if fastlogin.Answer(os.Args[1:], fastlogin.Env{Getenv: os.Getenv, LookupEnv: os.LookupEnv}, os.Stdout) {
		return
	}
	os.Exit(handoff.Run(os.Args[1:]))
}
