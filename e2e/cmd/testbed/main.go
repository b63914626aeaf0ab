// Command testbed brings the pinniped e2e test bed up and down by hand.
//
//	testbed up      [flags]          bring a bed up (a real single-node cluster + Dex)
//	testbed down    [flags]          tear it down (by PID; restores host state)
//	testbed status  [flags]          say whether every daemon still runs
//	testbed env     [flags]          print how to use the bed from a shell
//	testbed shell   [flags]          open a shell inside the bed with the admin kubeconfig
//	testbed exec    [flags] -- CMD   run CMD inside the bed with the admin kubeconfig
//	testbed image   [flags] --binary PATH --tag REF   build an image from a static binary and import it
//	testbed token   [flags] [--user EMAIL] [--claims]  log in to the bed's Dex (password grant), print the ID token
//	testbed dex-proxy [flags] [--listen 127.0.0.1:5556] serve the bed's Dex at https://localhost:PORT on this machine
//
// Flags (or PINNIPED_E2E_* variables): --name, --profile kubeadm|managed, --kube-version, --state-dir, --bin-dir.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

func main() {
	testbed.RunRoleIfRequested()
	os.Exit(run())
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: testbed up|down|status|env|shell|exec|image [flags]
  --name NAME          bed name (default $PINNIPED_E2E_NAME or "e2e")
  --profile PROFILE    kubeadm (kcm as static pod) or managed (kcm as host process)
  --kube-version 1.N   Kubernetes minor (default $PINNIPED_E2E_KUBE_VERSION, else the newest): the toolchain
                       PINNIPED_E2E_KUBE_VERSION=1.N e2e/scripts/build-tools.sh built, $PINNIPED_E2E_CACHE/bin/current-1.N
  --state-dir DIR      state directory (default /var/lib/pinniped-e2e/NAME)
  --bin-dir DIR        toolchain (default $PINNIPED_E2E_CACHE/bin/current, from e2e/scripts/build-tools.sh)
exec: testbed exec [flags] -- COMMAND [ARGS...]
image: testbed image [flags] --binary PATH --tag REF
token: testbed token [flags] [--user EMAIL] [--claims]   (a verified Dex ID token, or its claims)
dex-proxy: testbed dex-proxy [flags] [--listen 127.0.0.1:5556]   (the bed's Dex for a browser on this machine,
           at https://localhost:PORT, trusting the bed's CA; from another machine: ssh -L PORT:127.0.0.1:PORT)`)
}

func run() int {
	if len(os.Args) < 2 {
		usage()
		return 2
	}
	verb := os.Args[1]
	cfg := testbed.ConfigFromEnv()
	fs := flag.NewFlagSet("testbed "+verb, flag.ContinueOnError)
	fs.StringVar(&cfg.Name, "name", cfg.Name, "bed name")
	fs.StringVar(&cfg.Profile, "profile", cfg.Profile, "kubeadm or managed")
	stateDir := fs.String("state-dir", "", "state directory")
	binDir := fs.String("bin-dir", "", "toolchain directory")
	fs.StringVar(&cfg.KubeMinor, "kube-version", cfg.KubeMinor, "Kubernetes minor, e.g. 1.35")
	binary := fs.String("binary", "", "image: static binary")
	tag := fs.String("tag", "", "image: image reference")
	user := fs.String("user", testbed.DexUsers[0].Email, "token: Dex user")
	claims := fs.Bool("claims", false, "token: print the verified claims instead of the token")
	listen := fs.String("listen", "127.0.0.1:5556", "dex-proxy: loopback address to serve on")
	if err := fs.Parse(os.Args[2:]); err != nil {
		usage()
		return 2
	}
	// A toolchain given neither by flag nor env follows the (possibly
	// flag-given) version.
	cfg.KubeMinor = strings.TrimPrefix(cfg.KubeMinor, "v")
	if *binDir != "" {
		cfg.BinDir = *binDir
	} else if os.Getenv(testbed.EnvBinDir) == "" {
		cfg.BinDir = testbed.ToolchainDir(cfg.KubeMinor)
	}
	// A state dir given neither by flag nor env follows the (possibly flag-given) name.
	if *stateDir != "" {
		cfg.StateDir = *stateDir
	} else if os.Getenv(testbed.EnvStateDir) == "" {
		cfg.StateDir = filepath.Join("/var/lib/pinniped-e2e", cfg.Name)
	}
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch verb {
	case "up":
		return up(ctx, cfg)
	case "down":
		return down(ctx, cfg)
	case "status":
		return status(cfg)
	case "env":
		b, err := testbed.Load(cfg.StateDir)
		if err != nil {
			return fail(fmt.Errorf("no bed %q is up (%w)", cfg.Name, err))
		}
		printEnv(b.Config())
		return 0
	case "shell":
		return inBed(cfg, []string{shell()}, true)
	case "exec":
		if fs.NArg() == 0 {
			usage()
			return 2
		}
		return inBed(cfg, fs.Args(), false)
	case "image":
		return image(cfg, *binary, *tag)
	case "dex-proxy":
		return dexProxy(ctx, cfg, *listen)
	case "token":
		return token(ctx, cfg, *user, *claims)
	default:
		usage()
		return 2
	}
}

// status says whether the bed is up and healthy.
func status(cfg testbed.Config) int {
	b, err := testbed.Load(cfg.StateDir)
	if err != nil {
		return fail(fmt.Errorf("no bed %q is up (%w)", cfg.Name, err))
	}
	if err := b.Healthy(); err != nil {
		return fail(err)
	}
	fmt.Printf("bed %q is up (profile %s); state in %s\n", b.Config().Name, b.Config().Profile, b.Config().StateDir)
	return 0
}

// image imports the image of a static binary into the bed's containerd.
func image(cfg testbed.Config, binary, tag string) int {
	if binary == "" || tag == "" {
		usage()
		return 2
	}
	tar, err := testbed.CachedImage(binary, tag)
	if err != nil {
		return fail(err)
	}
	if err := testbed.ImportImage(cfg.ContainerdSocket(), tar); err != nil {
		return fail(err)
	}
	fmt.Printf("imported %s into bed %q\n", tag, cfg.Name)
	return 0
}

// dexProxy serves the bed's Dex on this machine's loopback, for a browser.
func dexProxy(ctx context.Context, cfg testbed.Config, listen string) int {
	b, err := testbed.Load(cfg.StateDir)
	if err != nil {
		return fail(fmt.Errorf("no bed %q is up (%w)", cfg.Name, err))
	}
	p, err := testbed.NewDexProxy(ctx, b.Config(), listen)
	if err != nil {
		return fail(err)
	}
	fmt.Println(p.URL) // alone on stdout, for scripts
	fmt.Fprintf(os.Stderr, "The bed's Dex is at %s on this machine (CA: %s).\nOpen Dex's links with %s in place of %s. Ctrl-C to stop.\n",
		p.URL, b.Config().TestbedCAFile(), p.URL, b.Config().DexIssuer())
	if err := p.Serve(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// token prints a verified Dex ID token for user, or its claims.
func token(ctx context.Context, cfg testbed.Config, user string, claims bool) int {
	// Dex listens only inside the bed's network namespace.
	if !testbed.InNetNS(cfg) {
		if _, err := os.Stat(cfg.NetNSPath()); err != nil {
			return fail(fmt.Errorf("no bed %q is up", cfg.Name))
		}
		code, err := testbed.Reexec(cfg, nil)
		if err != nil {
			return fail(err)
		}
		return code
	}
	b, err := testbed.Load(cfg.StateDir)
	if err != nil {
		return fail(fmt.Errorf("no bed %q is up (%w)", cfg.Name, err))
	}
	raw, claimsJSON, err := b.DexPasswordToken(ctx, user)
	if err != nil {
		return fail(err)
	}
	if claims {
		fmt.Println(claimsJSON)
	} else {
		fmt.Println(raw)
	}
	return 0
}

func up(ctx context.Context, cfg testbed.Config) int {
	if err := testbed.CheckHost(); err != nil {
		return fail(err)
	}
	if !testbed.InNetNS(cfg) {
		unlock, err := testbed.LockBed(cfg, os.Stderr)
		if err != nil {
			return fail(err)
		}
		defer unlock()
		if err := testbed.EnsureNetNS(cfg); err != nil {
			return fail(err)
		}
		code, err := testbed.Reexec(cfg, nil)
		if err != nil {
			return fail(err)
		}
		return code
	}
	b, err := testbed.Up(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbed up failed: %v\n\nLogs: %s\nThe partial bed is left for inspection; remove it with: testbed down --name %s\n", err, cfg.LogDir(), cfg.Name)
		return 1
	}
	printEnv(b.Config())
	return 0
}

func down(ctx context.Context, cfg testbed.Config) int {
	if !testbed.InNetNS(cfg) {
		unlock, err := testbed.LockBed(cfg, os.Stderr)
		if err != nil {
			return fail(err)
		}
		defer unlock()
	}
	if _, err := os.Stat(cfg.NetNSPath()); err == nil && !testbed.InNetNS(cfg) {
		code, err := testbed.Reexec(cfg, nil)
		if err != nil {
			return fail(err)
		}
		return code
	}
	if err := testbed.Down(ctx, cfg, os.Stderr); err != nil {
		return fail(fmt.Errorf("teardown incomplete: %w", err))
	}
	return 0
}

// inBed runs argv inside the bed's network namespace with the admin kubeconfig.
func inBed(cfg testbed.Config, argv []string, interactive bool) int {
	b, err := testbed.Load(cfg.StateDir)
	if err != nil {
		return fail(fmt.Errorf("no bed %q is up (%w)", cfg.Name, err))
	}
	c := b.Config()
	cmd := testbed.NetNSCommand(c, argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The bed's toolchain comes first on PATH: kubectl at the cluster's version. kubectl's
	// discovery cache is the bed's own: every bed of a profile has the same API server
	// address, and ~/.kube/cache would answer with an earlier bed's API groups.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.AdminKubeconfig(), "PINNIPED_E2E_STATE_DIR="+c.StateDir, "PINNIPED_E2E_NAME="+c.Name,
		"KUBECACHEDIR="+filepath.Join(c.StateDir, "kube-cache"),
		"PATH="+c.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if interactive {
		cmd.Env = append(cmd.Env, "PS1=[testbed "+c.Name+"] \\w\\$ ")
		fmt.Fprintf(os.Stderr, "Entering bed %q (KUBECONFIG=%s). Exit the shell to leave; the bed keeps running.\n", c.Name, c.AdminKubeconfig())
	}
	signal.Ignore(os.Interrupt) // the child gets the terminal's Ctrl-C
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return fail(err)
	}
	return 0
}

func shell() string {
	if s := os.Getenv("SHELL"); s != "" {
		return s
	}
	return "/bin/bash"
}

func printEnv(c testbed.Config) {
	fmt.Printf(`Test bed %[1]q is up (profile %[2]s).
  API server:   %[3]s   (reachable only inside network namespace %[4]s)
  Dex issuer:   %[5]s   client %[6]q, CA %[7]s
  oidcop:       %[11]s   client %[12]q, same CA (a second OpenID provider; revokes tokens, ends sessions)
  State, logs:  %[8]s
Get a shell with the admin kubeconfig:
  go run ./e2e/cmd/testbed shell --name %[1]s
or by hand:
  nsenter --net=%[9]s bash        then: source %[10]s
Tear it down:
  go run ./e2e/cmd/testbed down --name %[1]s
`, c.Name, c.Profile, c.APIServerURL(), c.NetNS(), c.DexIssuer(), testbed.DexClientID, c.TestbedCAFile(), c.StateDir, c.NetNSPath(), filepath.Join(c.StateDir, "env.sh"),
		c.OIDCOPIssuer(), testbed.OIDCOPClientID)
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "testbed: %v\n", err)
	return 1
}
