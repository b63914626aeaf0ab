//go:build !unix

package filestore

import "os"

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }

// ownedByMe: on Windows a user's profile directories are their own.
func ownedByMe(os.FileInfo) bool { return true }
