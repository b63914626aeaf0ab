// Package buildinfo describes a build of a pinniped binary and prints it.
// It is a leaf (no pinniped imports) under agent/apis, the vocabulary both
// wings share, so that everything holding build information can import it
// without the agent depending on the CLI: the main packages, cmdutil's
// Factory, the agent's command tree, and `pinniped version` (package
// version), which itself needs the Factory.
package buildinfo

import (
	"crypto/fips140"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"
)

// Info describes a build. The main package fills it from -ldflags -X values
// set by the Makefile and goreleaser.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// FIPS is FIPS(): empty unless the binary runs in FIPS 140-3 mode. Only
	// the one-line form shows it: -o json and -o yaml keep upstream's
	// fields.
	FIPS string `json:"fips,omitempty"`
}

// Complete fills in what only the running binary knows.
func (i Info) Complete() Info {
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	i.GoVersion = runtime.Version()
	i.Platform = runtime.GOOS + "/" + runtime.GOARCH
	i.FIPS = FIPS()
	return i
}

// FIPSBuild says whether this binary is the release's FIPS flavour: built
// with GOFIPS140 (a Go FIPS 140-3 module), whatever mode it runs in now.
func FIPSBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "GOFIPS140" {
			return s.Value != "" && s.Value != "off"
		}
	}
	return false
}

// FIPS says whether this process runs in Go's FIPS 140-3 mode, and with
// which module: empty when it does not; "FIPS 140-3 mode, Go module
// v1.0.0" for a build with GOFIPS140=v1.0.0 (the release's FIPS flavour),
// or module "latest" for GODEBUG=fips140=on on an ordinary build, which is
// not a validated module; ", enforced" under fips140=only, where anything
// outside the module fails instead of running.
func FIPS() string {
	if !fips140.Enabled() {
		return ""
	}
	s := "FIPS 140-3 mode, Go module " + fips140.Version()
	if fips140.Enforced() {
		s += ", enforced"
	}
	return s
}

// String is the one-line human form.
func (i Info) String() string {
	s := fmt.Sprintf("%s (commit %s", i.Version, i.Commit)
	if i.BuildDate != "" {
		s += ", built " + i.BuildDate
	}
	s += fmt.Sprintf(", %s, %s", i.GoVersion, i.Platform)
	if i.FIPS != "" {
		s += ", " + i.FIPS
	}
	return s + ")"
}

// Upstream is the build in the shape upstream Pinniped prints with -o json
// and -o yaml (Kubernetes' version.Info), so scripts written for it work.
func (i Info) Upstream() apimachineryversion.Info {
	v := apimachineryversion.Info{GitVersion: i.Version, GitCommit: i.Commit, GitTreeState: "clean", BuildDate: i.BuildDate,
		GoVersion: i.GoVersion, Compiler: runtime.Compiler, Platform: i.Platform}
	if strings.Contains(i.Version, "dirty") {
		v.GitTreeState = "dirty"
	}
	if parts := strings.SplitN(strings.TrimPrefix(i.Version, "v"), ".", 3); len(parts) == 3 {
		v.Major, v.Minor = parts[0], parts[1]
	}
	return v
}

// Format is the output format of a version command's -o, reconciled with
// the agent's earlier --json (legacyJSON), which both binaries still
// accept. Both version commands use it, so they refuse the same things in
// the same words. --json is hidden rather than marked deprecated: cobra
// prints deprecation notices on the command's output, stdout, where they
// would break the JSON a script reads; the notice goes to warn instead.
func Format(output string, legacyJSON bool, warn io.Writer) (string, error) {
	if legacyJSON {
		fmt.Fprintln(warn, "Flag --json has been deprecated, use -o json")
		if output != "" && output != "json" {
			return "", fmt.Errorf("--json and -o %s disagree", output)
		}
		output = "json"
	}
	switch output {
	case "", "json", "yaml":
		return output, nil
	}
	return "", fmt.Errorf("unknown output format %q: use json or yaml, or leave -o unset for one line", output)
}

// Write prints i in format (from Format): "" is the one line, json and
// yaml upstream's shape.
func (i Info) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(i.Upstream())
	case "yaml":
		b, err := yaml.Marshal(i.Upstream())
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err := fmt.Fprintf(w, "%s\n", i)
	return err
}
