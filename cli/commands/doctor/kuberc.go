package doctor

import (
	"path/filepath"
	"strings"
)

// kuberc is the part of kubectl's preferences file (kuberc, Kubernetes
// 1.35) that decides which credential plugins kubectl may run.
type kuberc struct {
	Policy string `json:"credentialPluginPolicy"`
	// Allowlist is nil when the field is absent: client-go refuses a list
	// given beside any policy but Allowlist, even an empty one.
	Allowlist []struct {
		Name string `json:"name"`
		// Command is what kubectl after 1.35 calls Name (deprecated there).
		Command string `json:"command"`
	} `json:"credentialPluginAllowlist"`
}

// kubercPath is the file kubectl reads its preferences from: $KUBERC, else
// ~/.kube/kuberc; "" when kubectl reads none (KUBERC=off, or the feature
// turned off with KUBECTL_KUBERC=false).
func (s *execFacts) kubercPath() string {
	getenv := s.d.f.Getenv
	if strings.EqualFold(getenv("KUBECTL_KUBERC"), "false") {
		return ""
	}
	switch p := getenv("KUBERC"); {
	case strings.EqualFold(p, "off"):
		return ""
	case p != "":
		return p
	}
	home := getenv("HOME")
	if home == "" {
		home = getenv("USERPROFILE")
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".kube", "kuberc")
}
