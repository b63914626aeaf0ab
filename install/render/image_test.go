package render_test

import (
	"testing"

	"github.com/pinniped-kit/pinniped/install/render"
)

// TestDefaultImage: the CLI installs the agent of its own release and its
// own flavour; a development build, the latest of that flavour.
func TestDefaultImage(t *testing.T) {
	for _, c := range []struct {
		version string
		fips    bool
		want    string
	}{
		{"v1.2.3", false, "1.2.3"},
		{"v1.2.3", true, "1.2.3-fips"},
		{"dev", false, "latest"},
		{"v1.2.3-4-gabc-dirty", true, "latest-fips"},
		{"", true, "latest-fips"},
	} {
		if got := render.DefaultImage(c.version, c.fips); got != render.DefaultImageRepository+":"+c.want {
			t.Errorf("DefaultImage(%q, %v) = %q, want tag %q", c.version, c.fips, got, c.want)
		}
	}
}
