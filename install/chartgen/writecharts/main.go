// Command writecharts writes the Helm charts' generated templates
// (`make generate` runs it from the repository's root).
package main

import (
	"fmt"
	"os"

	"github.com/pinniped-kit/pinniped/install/chartgen"
)

func main() {
	dir := "install/chart"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := chartgen.Write(dir); err != nil {
		fmt.Fprintln(os.Stderr, "writecharts:", err)
		os.Exit(1)
	}
}
