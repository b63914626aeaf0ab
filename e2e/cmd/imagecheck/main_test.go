package main

import "testing"

func TestPrerelease(t *testing.T) {
	for v, want := range map[string]bool{
		"1.2.3":                       false,
		"1.2.3+build.7":               false,
		"1.2.3-rc.1":                  true,
		"0.0.0-rehearsal.g0123abcdef": true,
		"1.2.3-rc.1+build-7":          true,
		"1.2.3+build-7":               false,
	} {
		if got := prerelease(v); got != want {
			t.Errorf("prerelease(%q) = %v, want %v", v, got, want)
		}
	}
}
