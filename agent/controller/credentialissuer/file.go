package credentialissuer

import "os"

func readFile(path string) ([]byte, error) { return os.ReadFile(path) } //nolint:gosec // the in-cluster CA path
