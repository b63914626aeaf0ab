package kubeconfig

import (
	"slices"
)

// FilterScopes drops the scopes the provider says it does not support
// (providers such as Dex refuse a login that asks for unknown scopes).
// openid is always kept. When the provider lists none, all are kept.
func FilterScopes(want, supported []string) []string {
	if len(supported) == 0 {
		return want
	}
	var out []string
	for _, s := range want {
		if s == "openid" || slices.Contains(supported, s) {
			out = append(out, s)
		}
	}
	return out
}
