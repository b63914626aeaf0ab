//go:build windows

package credstore

import "os"

func strconvUID() string { return os.Getenv("USERNAME") }
