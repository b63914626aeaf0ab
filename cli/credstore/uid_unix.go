//go:build !windows

package credstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/pinniped-kit/pinniped/cache/privatedir"
)

func strconvUID() string { return strconv.Itoa(os.Getuid()) }

// privateTempDir returns dir if it is, or can be made, a directory owned by
// this user that nobody else may enter (privatedir's rule): in a
// world-writable parent, anyone could have made it first, to read what
// this user writes there or to plant credentials this user would send.
func privateTempDir(dir string) (string, error) {
	// Only a parent where nobody else can rename or remove the user's
	// entries: CheckParent's rule, the file cache writers' own.
	if err := privatedir.CheckParent(dir); errors.Is(err, privatedir.ErrNotPrivate) {
		return "", fmt.Errorf("no home directory, and %w; or set HOME or XDG_CONFIG_HOME", err)
	} else if err != nil {
		return "", fmt.Errorf("no home directory, and %w; set HOME or XDG_CONFIG_HOME", err)
	}
	err := os.Mkdir(dir, 0o700)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("no home directory, and %s cannot be created: %w; set HOME or XDG_CONFIG_HOME", dir, err)
	}
	if err := privatedir.Check(dir); err != nil {
		return "", fmt.Errorf("refusing to keep credentials there: %w; or set HOME or XDG_CONFIG_HOME", err)
	}
	return dir, nil
}
