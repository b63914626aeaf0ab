//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// TestMain brings the test bed up once for all tests (or reuses one that is up), runs the
// tests inside the bed's network namespace, and tears the bed down if it brought it up.
//
// The test binary re-executes itself under `nsenter --net=<bed netns> dbus-run-session --`
// so that every test, and every subprocess a test starts (kubectl, the pinniped CLI,
// Chromium), reaches the API server and Dex directly, and has a private D-Bus session bus for
// the keyring.
//
// Environment:
//
//	PINNIPED_E2E_NAME, PINNIPED_E2E_PROFILE, PINNIPED_E2E_STATE_DIR, PINNIPED_E2E_BIN_DIR  see testbed.ConfigFromEnv
//	PINNIPED_E2E_KEEP=1       leave a bed this run brought up running afterwards
//	PINNIPED_E2E_ARTIFACTS    where the bed's logs are copied when a run fails
//
// A bed that is already up and healthy is reused. It is torn down at the end only if a test
// run created it (an interrupted run's bed is cleaned up by the next run); a bed brought up
// by hand with `testbed up` is left alone.
func TestMain(m *testing.M) {
	testbed.RunRoleIfRequested()
	os.Exit(testMain(m))
}

const envInner = "PINNIPED_E2E_INNER"

// envOutsideNetNS names the network namespace the tests were started in (outside the bed's).
const envOutsideNetNS = "PINNIPED_E2E_OUTSIDE_NETNS"

func testMain(m *testing.M) int {
	flag.Parse()
	cfg := testbed.ConfigFromEnv()
	if err := cfg.Validate(); err != nil {
		return failMain(err)
	}
	if os.Getenv(envInner) == "" {
		// Never skip: a machine that cannot host the bed must fail the run, loudly.
		if err := testbed.CheckHost(); err != nil {
			return failMain(fmt.Errorf("this environment cannot host the e2e test bed: %w", err))
		}
		// One test run at a time per bed: another run must not reuse and then tear down
		// the bed under us.
		unlock, err := testbed.LockBed(cfg, os.Stderr)
		if err != nil {
			return failMain(err)
		}
		defer unlock()
		// A bed left broken (e.g. by a killed run) is torn down from out here: its namespace
		// is replaced by a fresh one before the tests enter it.
		if bed, err := testbed.Load(cfg.StateDir); err == nil && bed.Healthy() != nil {
			fmt.Fprintf(os.Stderr, "e2e: test bed %q is unhealthy (%v); tearing it down\n", cfg.Name, bed.Healthy())
			if err := testbed.Down(context.Background(), cfg, os.Stderr); err != nil {
				return failMain(err)
			}
		}
		if err := testbed.EnsureNetNS(cfg); err != nil {
			return failMain(err)
		}
		busConfig, err := sessionBusConfig(cfg)
		if err != nil {
			return failMain(err)
		}
		defer os.Remove(busConfig)
		// Tests that play a program outside the bed (a person's browser) find this
		// process's network namespace here while it waits for them.
		outside := fmt.Sprintf("%s=/proc/%d/ns/net", envOutsideNetNS, os.Getpid())
		code, err := testbed.Reexec(cfg, []string{envInner + "=1", outside}, "dbus-run-session", "--config-file="+busConfig, "--")
		if err != nil {
			return failMain(fmt.Errorf("run tests inside the bed's network namespace: %w", err))
		}
		return code
	}
	if !testbed.InNetNS(cfg) {
		return failMain(fmt.Errorf("%s is set but this process is not in network namespace %s", envInner, cfg.NetNS()))
	}

	ctx := context.Background()
	owned := false
	// A bed that a test run brought up carries a marker; a later run that reuses it (e.g. after
	// an interrupted run) also tears it down. Beds brought up by hand are never torn down here.
	marker := filepath.Join(cfg.StateDir, "created-by-tests")
	bed, err := testbed.Load(cfg.StateDir)
	if err == nil && bed.Healthy() == nil {
		if want := os.Getenv(testbed.EnvProfile); want != "" && want != bed.Config().Profile {
			return failMain(fmt.Errorf("test bed %q is up with profile %s but %s=%s: tear it down (go run ./e2e/cmd/testbed down --name %s) or use another %s",
				cfg.Name, bed.Config().Profile, testbed.EnvProfile, want, cfg.Name, testbed.EnvName))
		}
		// A bed of another Kubernetes would have its results taken for
		// this one's (the version matrix runs one after another).
		if want := cfg.KubeMinor; want != "" && !strings.HasPrefix(bed.Config().KubeVersion, "v"+want+".") {
			have := bed.Config().KubeVersion
			if have == "" {
				have = "of a version it did not record"
			}
			return failMain(fmt.Errorf("test bed %q is up with Kubernetes %s but %s=%s: tear it down (go run ./e2e/cmd/testbed down --name %s) or use another %s",
				cfg.Name, have, testbed.EnvKubeVersion, want, cfg.Name, testbed.EnvName))
		}
		if want, err := filepath.EvalSymlinks(cfg.BinDir); err == nil && os.Getenv(testbed.EnvBinDir) != "" && want != bed.Config().BinDir {
			return failMain(fmt.Errorf("test bed %q is up with the toolchain in %s but %s=%s: tear it down (go run ./e2e/cmd/testbed down --name %s) or use another %s",
				cfg.Name, bed.Config().BinDir, testbed.EnvBinDir, cfg.BinDir, cfg.Name, testbed.EnvName))
		}
		_, statErr := os.Stat(marker)
		owned = statErr == nil
		fmt.Fprintf(os.Stderr, "e2e: reusing test bed %q (state in %s; torn down afterwards: %v)\n", cfg.Name, cfg.StateDir, owned)
	} else {
		start := time.Now()
		upCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		bed, err = testbed.Up(upCtx, cfg, os.Stderr)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: bring-up failed: %v\n", err)
			saveLogs(cfg)
			if os.Getenv("PINNIPED_E2E_KEEP") == "" {
				_ = testbed.Down(ctx, cfg, os.Stderr)
			}
			return 1
		}
		owned = true
		_ = os.WriteFile(marker, nil, 0o600)
		fmt.Fprintf(os.Stderr, "e2e: test bed up in %s\n", time.Since(start).Round(time.Millisecond))
	}
	Bed = bed
	// Tests and their subprocesses use the bed's toolchain first (kubectl at the cluster's
	// version), and kubectl finds the admin kubeconfig without flags.
	_ = os.Setenv("PATH", bed.Config().BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	_ = os.Setenv("KUBECONFIG", bed.Config().AdminKubeconfig())
	// kubectl's discovery cache, keyed by the API server's address, must
	// be this run's: every bed of a profile has the same address, and an
	// earlier run's API groups (another install's suffix) would make short
	// names like "credentialissuer" resolve to a group that is gone.
	kubeCache, err := os.MkdirTemp("", "pinniped-e2e-kubecache-")
	if err != nil {
		return failMain(err)
	}
	defer os.RemoveAll(kubeCache)
	_ = os.Setenv("KUBECACHEDIR", kubeCache)
	// The two profiles' runs share HOME, and their beds the same addresses:
	// whatever a CLI keeps under the user's config directory (pinniped's
	// own, helm's) is this run's alone, so neither run sees the other's.
	userDirs, err := os.MkdirTemp("", "pinniped-e2e-home-")
	if err != nil {
		return failMain(err)
	}
	defer os.RemoveAll(userDirs)
	for env, sub := range map[string]string{"XDG_CONFIG_HOME": "config", "HELM_CONFIG_HOME": "helm/config", "HELM_CACHE_HOME": "helm/cache", "HELM_DATA_HOME": "helm/data"} {
		_ = os.Setenv(env, filepath.Join(userDirs, sub))
	}

	code := m.Run()

	stopKeyring()
	if code != 0 {
		saveLogs(cfg)
	}
	if owned && os.Getenv("PINNIPED_E2E_KEEP") == "" {
		if err := testbed.Down(ctx, cfg, os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: teardown: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	} else if owned {
		fmt.Fprintf(os.Stderr, "e2e: PINNIPED_E2E_KEEP is set; bed %q left up (go run ./e2e/cmd/testbed shell --name %s)\n", cfg.Name, cfg.Name)
	}
	return code
}

// saveLogs copies the bed's logs out of its state directory (which teardown removes) to
// $PINNIPED_E2E_ARTIFACTS (default /tmp/pinniped-e2e-logs) and says where.
func saveLogs(cfg testbed.Config) {
	root := os.Getenv("PINNIPED_E2E_ARTIFACTS")
	if root == "" {
		root = filepath.Join(os.TempDir(), "pinniped-e2e-logs")
	}
	dst := filepath.Join(root, cfg.Name+"-"+time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(dst, 0o700); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cannot save logs: %v\n", err)
		return
	}
	// Pod logs are symlinks into the kubelet's log dir; cp -L copies their contents.
	for _, src := range []string{cfg.LogDir(), filepath.Join(cfg.StateDir, "pod-logs")} {
		if _, err := os.Stat(src); err == nil {
			_ = exec.CommandContext(context.Background(), "cp", "-rL", src, dst).Run()
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: test bed logs saved in %s\n", dst)
}

// sessionBusConfig writes the configuration of the tests' private session bus: a normal
// session bus, except that it activates no services. On a stock bus, the first program that
// touches org.freedesktop.secrets (the pinniped CLI, Chromium, ...) makes dbus-daemon start a
// gnome-keyring-daemon with the real HOME and a locked keyring that wants a GUI prompt. Here a
// keyring exists only when a test asks for one (KeyringSession); otherwise keyring clients
// get a quick ServiceUnknown error, as on a machine without a keyring.
//
// The file has a fixed name per bed (written under the bed's lock), so a run that is killed
// before it can remove the file leaves one file behind at most, not one per run.
func sessionBusConfig(cfg testbed.Config) (string, error) {
	path := filepath.Join(os.TempDir(), "pinniped-e2e-bus-"+cfg.Name+".conf")
	err := os.WriteFile(path, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o600)
	return path, err
}

func failMain(err error) int {
	fmt.Fprintf(os.Stderr, "FAIL: e2e: %v\n", err)
	return 1
}
