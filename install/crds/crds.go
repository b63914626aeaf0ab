// Package crds embeds the CustomResourceDefinitions generated from
// agent/apis by controller-gen (`make generate`). Never edit the YAML by hand.
package crds

import "embed"

// FS holds one <group>_<plural>.yaml file per CRD.
//
//go:embed *.yaml
var FS embed.FS
