package kubecertagent

import (
	"context"
	"encoding/json"
	"io"
	"os"
)

// Print is the helper pod's side: it writes the two files as JSON on
// stdout, for Fetch to read through pods/exec.
func Print(w io.Writer, certPath, keyPath string) error {
	cert, err := os.ReadFile(certPath) //nolint:gosec // paths come from kube-controller-manager's flags
	if err != nil {
		return err
	}
	key, err := os.ReadFile(keyPath) //nolint:gosec // as above
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(map[string]string{"tls.crt": string(cert), "tls.key": string(key)})
}

// Sleep keeps the helper pod alive until it is stopped.
func Sleep(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
