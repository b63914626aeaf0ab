// Package layout holds the repository's test of its own map: every Go
// package is named, with its job, in docs/architecture.md, and every
// package the map names exists. It has no code of its own.
package layout
