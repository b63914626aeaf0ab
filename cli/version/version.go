// Package version implements `pinniped version`: what build is running.
package version

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
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
	return i
}

// String is the one-line human form.
func (i Info) String() string {
	s := fmt.Sprintf("%s (commit %s", i.Version, i.Commit)
	if i.BuildDate != "" {
		s += ", built " + i.BuildDate
	}
	return s + fmt.Sprintf(", %s, %s)", i.GoVersion, i.Platform)
}

// Options are the inputs of the version command.
type Options struct {
	Output string
	// JSON is the agent's earlier --json.
	JSON bool
	Info Info
	Out  io.Writer
}

// Validate rejects output formats we cannot print.
func (o *Options) Validate() error {
	if o.JSON {
		if o.Output != "" && o.Output != "json" {
			return fmt.Errorf("--json and -o %s disagree", o.Output)
		}
		o.Output = "json"
	}
	switch o.Output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use json or yaml, or leave -o unset for one line", o.Output)
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

// Run prints the build information.
func (o *Options) Run() error {
	switch o.Output {
	case "json":
		enc := json.NewEncoder(o.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(o.Info.Upstream())
	case "yaml":
		b, err := yaml.Marshal(o.Info.Upstream())
		if err != nil {
			return err
		}
		_, err = o.Out.Write(b)
		return err
	}
	_, err := fmt.Fprintf(o.Out, "%s\n", o.Info)
	return err
}

// NewCommand returns `version` for a binary called name.
func NewCommand(name string, info Info) *cobra.Command {
	o := &Options{Info: info.Complete()}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this " + name + " binary",
		Example: fmt.Sprintf(`  %[1]s version
  %[1]s version -o json`, name),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = cmd.OutOrStdout()
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "the same as -o json")
	_ = cmd.Flags().MarkDeprecated("json", "use -o json")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "json or yaml, with upstream Pinniped's field names (default: one line of text, which also names the commit, Go version and platform; upstream prints the version alone)")
	return cmd
}
