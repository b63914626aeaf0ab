package keyringstore

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/pinniped-kit/pinniped/cache"
)

// writePV1 stores value as versions before pv2 did: gzip, base64, chunks.
func writePV1(t *testing.T, service, key string, value []byte) int {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(value)
	_ = zw.Close()
	encoded := base64.RawStdEncoding.EncodeToString(buf.Bytes())
	var chunks []string
	for len(encoded) > chunkSize {
		chunks = append(chunks, encoded[:chunkSize])
		encoded = encoded[chunkSize:]
	}
	chunks = append(chunks, encoded)
	for i, c := range chunks {
		if i == 0 {
			c = fmt.Sprintf("pv1:%d:%s:", len(chunks), checksum(strings.Join(chunks, ""))) + c
		}
		if err := keyring.Set(service, chunkKey(key, i), c); err != nil {
			t.Fatal(err)
		}
	}
	return len(chunks)
}

// TestOlderFormatsAreAMissAndAreReplaced: a value a pre-release build
// wrote (gzip, "pv1") reads as missing, so the login runs again, and the
// next write replaces it with no chunk of it left behind.
func TestOlderFormatsAreAMissAndAreReplaced(t *testing.T) {
	defer forceChunkSize(1800)()
	keyring.MockInit()
	s := &Store{Service: "pinniped-test"}
	ctx := context.Background()
	v := make([]byte, 8<<10)
	_, _ = rand.Read(v) // incompressible: several chunks
	if n := writePV1(t, "pinniped-test", "k", v); n < 3 {
		t.Fatalf("only %d chunks; the test wants several", n)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("an older format: %v, want not found", err)
	}
	if err := s.Set(ctx, "k", []byte("fresh")); err != nil {
		t.Fatal(err)
	}
	if first, _ := keyring.Get("pinniped-test", "k"); !strings.HasPrefix(first, "pv2:1:") {
		t.Fatalf("rewritten as %.10q", first)
	}
	if _, err := keyring.Get("pinniped-test", "k#1"); !errors.Is(err, keyring.ErrNotFound) {
		t.Fatalf("old chunk left behind: %v", err)
	}
	if got, err := s.Get(ctx, "k"); err != nil || string(got) != "fresh" {
		t.Fatalf("read back %q %v", got, err)
	}
}
