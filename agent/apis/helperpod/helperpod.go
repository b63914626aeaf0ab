// Package helperpod is the configuration of the cluster-signing-key
// strategy's helper pod (the Deployment the agent runs beside
// kube-controller-manager): the user and group it runs as, and its
// Deployment's strategy. The agent acts on it; `pinniped install` and the
// Helm chart render it as the agent's flags and must refuse what the agent
// would refuse, so the flags are named, defaulted and checked here only.
// Standard library only: the CLI links it.
package helperpod

import (
	"errors"
	"fmt"
	"strconv"
)

// The agent's flags (and `pinniped install`'s, which passes them on).
const (
	FlagRunAsUser  = "kube-cert-agent-run-as-user"
	FlagRunAsGroup = "kube-cert-agent-run-as-group"
	FlagStrategy   = "kube-cert-agent-deployment-strategy"
)

// What each flag does, for both commands' --help.
const (
	UsageRunAsUser  = "user ID the cluster-signing-key helper pod runs as (0, root, reads the root-owned key kubeadm writes; set another where the key's owner differs and policy forbids root)"
	UsageRunAsGroup = "group ID the cluster-signing-key helper pod runs as"
	UsageStrategy   = "strategy of the helper pod's Deployment: RollingUpdate or Recreate (Recreate stops the old pod first, for clusters where two cannot run at once; empty: Kubernetes' default, RollingUpdate)"
)

// The Deployment strategies Kubernetes knows; empty leaves the API
// server's default (RollingUpdate), as upstream's unset
// deploymentStrategyType does.
const (
	RollingUpdate = "RollingUpdate"
	Recreate      = "Recreate"
)

// maxID is the largest user or group ID a pod's securityContext accepts.
const maxID = 1<<31 - 1

// Settings are the helper pod's. The zero value is the default: root
// (user and group 0), which reads the root-owned key kubeadm writes, and
// the API server's default strategy.
type Settings struct {
	RunAsUser  int64
	RunAsGroup int64
	// Strategy is RollingUpdate, Recreate or empty.
	Strategy string
}

// Validate refuses what a Deployment would refuse, naming the flag.
func (s Settings) Validate() error {
	var errs []error
	for _, id := range []struct {
		flag string
		v    int64
	}{{FlagRunAsUser, s.RunAsUser}, {FlagRunAsGroup, s.RunAsGroup}} {
		if id.v < 0 || id.v > maxID {
			errs = append(errs, fmt.Errorf("--%s=%d: want an ID from 0 to %d", id.flag, id.v, maxID))
		}
	}
	switch s.Strategy {
	case "", RollingUpdate, Recreate:
	default:
		errs = append(errs, fmt.Errorf("--%s=%q: want %s or %s (empty: Kubernetes' default, %s)", FlagStrategy, s.Strategy, RollingUpdate, Recreate, RollingUpdate))
	}
	return errors.Join(errs...)
}

// IsDefault reports whether s is the zero value, which renders no flag.
func (s Settings) IsDefault() bool { return s == Settings{} }

// Args are the agent's flags for s, only those that differ from the
// default, so an install that sets nothing renders what it did before.
func (s Settings) Args() []string {
	var args []string
	if s.RunAsUser != 0 {
		args = append(args, "--"+FlagRunAsUser+"="+strconv.FormatInt(s.RunAsUser, 10))
	}
	if s.RunAsGroup != 0 {
		args = append(args, "--"+FlagRunAsGroup+"="+strconv.FormatInt(s.RunAsGroup, 10))
	}
	if s.Strategy != "" {
		args = append(args, "--"+FlagStrategy+"="+s.Strategy)
	}
	return args
}
