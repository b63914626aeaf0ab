package loginflags

import (
	"strconv"
	"strings"
	"time"
)

// Flag is one command-line flag: where its value goes and its default.
type Flag struct {
	Name string
	// Target is a *string, *bool, *int, *time.Duration, or *[]string (a
	// comma-separated list, repeatable, like pflag's StringSlice).
	Target any
	// Default has the type Target points to.
	Default any
	Usage   string
	Hidden  bool
}

// Parse sets every flag to its default, then applies args, and reports
// whether it is certain the engine's pflag parsing would accept args and
// produce the same values.
//
// It exists so the front binary, which kubectl starts before nearly every
// request, needs neither pflag nor what pflag links (net, encoding/csv):
// each costs start-up time in every process. It accepts what kubeconfigs
// contain (--name=value, --name value, bare booleans) and declines the rest
// (help, shorthands, positional arguments, "--", quoted lists, numbers in
// other bases): the front then hands the command line to the engine, which
// decides with pflag itself. A fuzz test holds it to pflag's results.
func Parse(flags []Flag, args []string) bool {
	for _, f := range flags {
		if !setDefault(f) {
			return false
		}
	}
	seen := make([]bool, len(flags))
	for len(args) > 0 {
		arg := args[0]
		args = args[1:]
		if len(arg) < 3 || !strings.HasPrefix(arg, "--") || arg[2] == '-' {
			return false
		}
		name, value, hasValue := strings.Cut(arg[2:], "=")
		i := find(flags, name)
		if i < 0 {
			return false
		}
		f := flags[i]
		if !hasValue {
			if _, isBool := f.Target.(*bool); isBool {
				value = "true"
			} else if len(args) > 0 {
				value, args = args[0], args[1:]
			} else {
				return false
			}
		}
		if !set(f, value, seen[i]) {
			return false
		}
		seen[i] = true
	}
	return true
}

func find(flags []Flag, name string) int {
	for i, f := range flags {
		if f.Name == name {
			return i
		}
	}
	return -1
}

func setDefault(f Flag) bool {
	var ok bool
	switch t := f.Target.(type) {
	case *string:
		*t, ok = f.Default.(string)
	case *bool:
		*t, ok = f.Default.(bool)
	case *int:
		*t, ok = f.Default.(int)
	case *time.Duration:
		*t, ok = f.Default.(time.Duration)
	case *[]string:
		var d []string
		d, ok = f.Default.([]string)
		*t = d
	default:
		ok = false
	}
	return ok
}

// set applies one value as pflag's Value.Set would, or reports false where
// it is unsure.
func set(f Flag, value string, again bool) bool {
	switch t := f.Target.(type) {
	case *string:
		*t = value
	case *bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return false
		}
		*t = b
	case *int:
		// pflag reads numbers with base prefixes ("010" is eight); only
		// plain decimals mean the same to both.
		if value != "0" && (value == "" || value[0] < '1' || value[0] > '9' || len(value) > 9) {
			return false
		}
		n, err := strconv.Atoi(value)
		if err != nil {
			return false
		}
		*t = n
	case *time.Duration:
		d, err := time.ParseDuration(value)
		if err != nil {
			return false
		}
		*t = d
	case *[]string:
		// pflag reads a list as one CSV record; without quotes or line
		// breaks that is a plain split on commas.
		if strings.ContainsAny(value, "\"\r\n") {
			return false
		}
		items := []string{}
		if value != "" {
			items = strings.Split(value, ",")
		}
		if again {
			items = append(*t, items...)
		}
		*t = items
	default:
		return false
	}
	return true
}
