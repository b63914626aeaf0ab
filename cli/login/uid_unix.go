//go:build !windows

package login

import (
	"os"
	"strconv"
)

func strconvUID() string { return strconv.Itoa(os.Getuid()) }
