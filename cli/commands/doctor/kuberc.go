package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
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
func (r *run) kubercPath() string {
	getenv := r.d.f.Getenv
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

// checkPluginPolicy: kubectl 1.35 refuses credential plugins that its
// kuberc does not allow, with an error that names neither the file nor the
// fix.
func checkPluginPolicy(_ context.Context, r *run) Result {
	if !r.frontOK {
		return skip("needs the pinniped binary (exec.front)")
	}
	path := r.kubercPath()
	if path == "" {
		return ok("kubectl reads no kuberc: every credential plugin may run")
	}
	raw, err := os.ReadFile(path) //nolint:gosec // kubectl's own preferences file
	if errors.Is(err, fs.ErrNotExist) {
		return ok("no %s: every credential plugin may run", path)
	}
	if err != nil {
		return warn(err.Error(), fmt.Sprintf("kubectl could not read %s either: fix its permissions", path))
	}
	var pref kuberc
	if err := yaml.Unmarshal(raw, &pref); err != nil {
		return warn(err.Error(), fmt.Sprintf("%s does not parse, and kubectl refuses it too: fix it (kubectl kuberc view shows it)", path))
	}
	// name: is what every kubectl with a plugin policy reads (1.35 knows
	// no other; 1.36 took command: as its new spelling and still reads it).
	entry := "credentialPluginAllowlist:\n  - name: " + r.front
	if pref.Allowlist != nil && pref.Policy != "Allowlist" {
		// client-go's ValidatePluginPolicy: kubectl runs no plugin at all.
		return fail(fmt.Sprintf("credentialPluginAllowlist without credentialPluginPolicy: Allowlist in %s", path),
			fmt.Sprintf("kubectl refuses every credential plugin over this (\"misconfigured credential plugin allowlist\"): in %s set credentialPluginPolicy: Allowlist, and keep pinniped in the list:\n%s", path, entry))
	}
	switch pref.Policy {
	case "", "AllowAll":
		return ok("%s allows every credential plugin", path)
	case "DenyAll":
		return fail(fmt.Sprintf("credentialPluginPolicy: DenyAll in %s", path),
			fmt.Sprintf("kubectl refuses every credential plugin, pinniped too: in %s set credentialPluginPolicy: Allowlist and add\n%s", path, entry))
	case "Allowlist":
	default:
		return warn(fmt.Sprintf("credentialPluginPolicy: %q in %s", pref.Policy, path),
			"kubectl knows AllowAll, DenyAll and Allowlist: fix the policy")
	}
	for i, a := range pref.Allowlist {
		// kubectl 1.36's conversion refuses both spellings with different
		// values, and client-go's validateAllowlist a path filepath.Clean
		// would change. With the file named by $KUBERC kubectl then fails
		// every command; with the default file it warns and reads none of
		// it (every plugin may run, and the policy is lost).
		if a.Name != "" && a.Command != "" && a.Name != a.Command {
			return fail(fmt.Sprintf("entry %d of credentialPluginAllowlist in %s has both name: %s and command: %s", i+1, path, a.Name, a.Command),
				fmt.Sprintf("kubectl 1.36 and later refuse the file over it (command: is name:'s new spelling), and kubectl 1.35 reads only the name: keep one, such as\n  - name: %s", r.front))
		}
		name := a.Command
		if name == "" {
			name = a.Name
		}
		if name == "" {
			return fail(fmt.Sprintf("entry %d of credentialPluginAllowlist in %s names no plugin", i+1, path),
				fmt.Sprintf("kubectl refuses every credential plugin over it (\"empty allowlist entry\"): remove it, or write\n  - name: %s", r.front))
		}
		if filepath.Clean(name) != name {
			return fail(fmt.Sprintf("entry %d of credentialPluginAllowlist in %s is not a clean path: %s", i+1, path, name),
				fmt.Sprintf("kubectl refuses the whole allowlist over it (\"non-normalized file path\"): write it as %s", filepath.Clean(name)))
		}
	}
	// kubectl 1.35 reads only name: an entry without one is an empty entry
	// there, and client-go then refuses the whole list, pinniped's entry
	// too.
	commandOnly := 0
	for i, a := range pref.Allowlist {
		if a.Name == "" && commandOnly == 0 {
			commandOnly = i + 1
		}
	}
	for _, a := range pref.Allowlist {
		name := a.Command
		if name == "" {
			name = a.Name
		}
		allowed := ""
		if name == r.front {
			allowed = name
		} else if !strings.ContainsRune(name, filepath.Separator) {
			if p, err := r.d.LookPath(name); err == nil && p == r.front {
				allowed = name + ", found at " + p
			}
		}
		if allowed == "" {
			continue
		}
		if commandOnly != 0 {
			return warn(fmt.Sprintf("allowed by %s (%s), but kubectl 1.35 refuses the whole list: entry %d has no name:", path, allowed, commandOnly),
				fmt.Sprintf("for kubectl 1.35 too, spell every entry name: (1.36 and later read it as well), such as\n  - name: %s", r.front))
		}
		return ok("allowed by %s (%s)", path, allowed)
	}
	return fail(fmt.Sprintf("%s allows only the credential plugins it lists, and not %s", path, r.front),
		fmt.Sprintf("kubectl refuses pinniped (\"plugin ... not permitted by the credential plugin allowlist\"): add this entry to credentialPluginAllowlist in %s\n  - name: %s", path, r.front))
}
