// Package flagset registers loginflags' flag table on a pflag.FlagSet, for
// the engine's cobra commands. It is a package of its own so the front
// binary, which parses the same table with loginflags.Parse, never links
// pflag.
package flagset

import (
	"errors"
	"fmt"
	"io"
	"strings"
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
	if err := parse(fs, args); err != nil {
		return nil, err
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
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	return s.Config(lookupEnv)
}

// parse parses args on fs; its errors name the flag at fault but never an
// argument's value: these arguments come from a kubeconfig, and a token
// pasted in the wrong place (a positional argument, a misspelt flag) must
// not reach a terminal or a report through an error message.
func parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return Valueless(err)
	}
	return UnexpectedArgs(fs.NArg())
}

// UnexpectedArgs is the error for n positional arguments (nil for none),
// counted, never quoted.
func UnexpectedArgs(n int) error {
	switch n {
	case 0:
		return nil
	case 1:
		return errors.New("1 unexpected argument (not a flag; the login takes flags only)")
	default:
		return fmt.Errorf("%d unexpected arguments (not flags; the login takes flags only)", n)
	}
}

// Valueless rewrites pflag's errors, which quote the argument, to name only
// the flag: for the login commands' own parsing too (kubectl shows their
// errors, and CI logs keep them).
func Valueless(err error) error {
	var (
		notExist *pflag.NotExistError
		required *pflag.ValueRequiredError
		invalid  *pflag.InvalidValueError
		syntax   *pflag.InvalidSyntaxError
	)
	switch {
	case errors.As(err, &notExist) && notExist.GetSpecifiedShortnames() != "":
		return errors.New("an unknown single-dash flag (the login's flags are all --long)")
	case errors.As(err, &notExist):
		return fmt.Errorf("unknown flag --%s", notExist.GetSpecifiedName())
	case errors.As(err, &required) && required.GetFlag() != nil:
		return fmt.Errorf("flag --%s needs a value", required.GetFlag().Name)
	case errors.As(err, &invalid) && invalid.GetFlag() != nil:
		return fmt.Errorf("the value of --%s is not a valid %s", invalid.GetFlag().Name, invalid.GetFlag().Value.Type())
	case errors.As(err, &syntax):
		return errors.New("an argument is not a well-formed flag (bad flag syntax)")
	}
	return errors.New("the arguments do not parse")
}

// SecretArgs are the values in a `pinniped login oidc|static` argument list
// (those after "oidc" or "static") that may be secrets, found without
// parsing it (a list that does not parse must not leak either): every
// value of a flag whose name says secret (--token, --client-secret, also
// misspelt or unknown ones), and every argument that is not a flag or a
// flag's value, including all after "--" (a token pasted in the wrong
// place). Which flags take a value is read from both login tables.
func SecretArgs(args []string) []string {
	fs := pflag.NewFlagSet("secrets", pflag.ContinueOnError)
	var o loginflags.OIDC
	var s loginflags.Static
	Add(fs, o.Flags())
	for _, f := range s.Flags() {
		if fs.Lookup(f.Name) == nil {
			Add(fs, []loginflags.Flag{f})
		}
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i+1:]...)
		case !strings.HasPrefix(a, "-") || a == "-":
			out = append(out, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		takesNext := !hasValue && (f == nil || f.NoOptDefVal == "") && i+1 < len(args)
		if takesNext && f == nil && !SecretFlag(name) {
			// An unknown flag: whether the next argument is its value
			// cannot be told; a non-flag after it is treated as
			// positional (so as a secret) on the next turn.
			takesNext = false
		}
		switch {
		case hasValue && (SecretFlag(name) || f == nil):
			out = append(out, value)
		case takesNext:
			if SecretFlag(name) {
				out = append(out, args[i+1])
			}
			i++
		}
	}
	return out
}

// SecretFlag says whether a flag's name says it holds a secret (--token,
// --client-secret, --password...); --token-env names a variable, not its
// value.
func SecretFlag(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "-env") {
		return false
	}
	for _, w := range []string{"token", "secret", "password", "key"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}
