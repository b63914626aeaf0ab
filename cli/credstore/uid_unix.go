//go:build !windows

package credstore

import (
	"os"
	"strconv"
)

func strconvUID() string { return strconv.Itoa(os.Getuid()) }
