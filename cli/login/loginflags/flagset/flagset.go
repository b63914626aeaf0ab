// Package flagset registers loginflags' flag table on a pflag.FlagSet, for
// the engine's cobra commands. It is a package of its own so the front
// binary, which parses the same table with loginflags.Parse, never links
// pflag.
package flagset

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/pinniped-kit/pinniped/cli/login/config"
	"github.com/pinniped-kit/pinniped/cli/login/loginflags"
)

// Add registers flags on fs. A flag whose Target and Default do not match
// is a programming error, found by the first test that builds the command.
func Add(fs *pflag.FlagSet, flags []loginflags.Flag) {
	for _, f := range flags {
		switch t := f.Target.(type) {
		case *string:
			fs.StringVar(t, f.Name, f.Default.(string), f.Usage)
		case *bool:
			fs.BoolVar(t, f.Name, f.Default.(bool), f.Usage)
		case *int:
			fs.IntVar(t, f.Name, f.Default.(int), f.Usage)
		case *time.Duration:
			fs.DurationVar(t, f.Name, f.Default.(time.Duration), f.Usage)
		case *[]string:
			fs.StringSliceVar(t, f.Name, f.Default.([]string), f.Usage)
		default:
			panic(fmt.Sprintf("loginflags: flag --%s has a target of type %T", f.Name, f.Target))
		}
		if f.Hidden {
			_ = fs.MarkHidden(f.Name)
		}
	}
}

// ParseOIDC reads the arguments of `pinniped login oidc` (those after
// "oidc", as a kubeconfig's exec entry has them) with pflag, exactly as the
// engine's command reads them, into the login they ask for in getenv's
// environment.
func ParseOIDC(args []string, getenv func(string) string) (*config.OIDC, error) {
	var o loginflags.OIDC
	fs := pflag.NewFlagSet("oidc", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	Add(fs, o.Flags())
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o.Config(getenv)
}

// ParseStatic reads the arguments of `pinniped login static` (those after
// "static") with pflag, exactly as the engine's command reads them, into
// the login they ask for in lookupEnv's environment.
func ParseStatic(args []string, lookupEnv func(string) (string, bool)) (*config.Static, error) {
	var s loginflags.Static
	fs := pflag.NewFlagSet("static", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	Add(fs, s.Flags())
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return s.Config(lookupEnv)
}
