//go:build windows

package login

import "os"

func strconvUID() string { return os.Getenv("USERNAME") }
