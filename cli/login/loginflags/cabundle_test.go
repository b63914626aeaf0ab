package loginflags

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --ca-bundle file without a PEM certificate (a DER file, a key, the
// wrong file) is named in the error.
func TestCABundleFileWithoutPEM(t *testing.T) {
	f := filepath.Join(t.TempDir(), "issuer-ca.der")
	if err := os.WriteFile(f, []byte{0x30, 0x82, 0x01}, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := (&OIDC{CABundlePaths: []string{f}}).IssuerCABundle()
	if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("got %v", err)
	}
}
