package testbed

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// The bed's own helper daemons (so far the LoadBalancer provider) are this same executable
// started again with a role in the environment. That works for the testbed command and for
// a test binary alike, without building another program.
const (
	envRole       = "PINNIPED_TESTBED_ROLE"
	envKubeconfig = "PINNIPED_TESTBED_KUBECONFIG"
	envLBRange    = "PINNIPED_TESTBED_LB_RANGE"
	roleLB        = "lb-controller"
)

// RunRoleIfRequested must be called first thing in main (or TestMain). If this process was
// started as one of the bed's helper daemons it runs that daemon and exits.
func RunRoleIfRequested() {
	role := os.Getenv(envRole)
	if role == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch role {
	case roleLB:
		err = runLBController(ctx, os.Getenv(envKubeconfig), os.Getenv(envLBRange))
	default:
		err = fmt.Errorf("unknown %s %q", envRole, role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}
