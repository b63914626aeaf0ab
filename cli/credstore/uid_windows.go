//go:build windows

package credstore

import "os"

func strconvUID() string { return os.Getenv("USERNAME") }

// privateTempDir: Windows' temporary directory is inside the user's own
// profile, which others cannot enter.
func privateTempDir(dir string) (string, error) { return dir, nil }
