// Command krewcheck runs krew's own manifest validator (validate-krew-manifest,
// which installs the plugin once per platform with the real `kubectl krew`)
// against a release snapshot's krew manifest and archives, without the
// release having been published: it serves the snapshot's directory on
// 127.0.0.1 and points the manifest's URIs there. The sha256 sums stay the
// ones goreleaser wrote, so krew checks the archives it would publish.
//
//	krewcheck -dist dist -validator PATH -krew PATH -kubectl PATH
//
// Run it in a network namespace of its own (.ci/krew-check.sh does): the
// tools it runs then cannot reach anything but the archives.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "krewcheck:", err)
		os.Exit(1)
	}
}

// releaseURL is the prefix goreleaser writes before an archive's name.
var releaseURL = regexp.MustCompile(`(?m)^(\s*uri:\s*)https://github\.com/[^\s]+/releases/download/[^/\s]+/`)

func run() error {
	dist := flag.String("dist", "dist", "the release snapshot's directory (holds krew/<plugin>.yaml and the archives)")
	plugin := flag.String("plugin", "pinniped", "the plugin's name (its manifest is krew/<plugin>.yaml)")
	validator := flag.String("validator", "", "path of validate-krew-manifest")
	krew := flag.String("krew", "", "path of krew's binary (run as the kubectl plugin kubectl-krew)")
	kubectl := flag.String("kubectl", "", "path of kubectl")
	flag.Parse()
	for name, v := range map[string]string{"-validator": *validator, "-krew": *krew, "-kubectl": *kubectl} {
		if v == "" {
			return fmt.Errorf("%s is required", name)
		}
	}
	manifest, err := os.ReadFile(filepath.Join(*dist, "krew", *plugin+".yaml"))
	if err != nil {
		return fmt.Errorf("read the snapshot's krew manifest (run make release-snapshot first): %w", err)
	}
	if !releaseURL.Match(manifest) {
		return errors.New("the krew manifest names no release download URI: has goreleaser's url_template changed?")
	}

	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on 127.0.0.1: %w", err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(*dist)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown(context.Background()) }()

	work, err := os.MkdirTemp("", "krewcheck-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	local := releaseURL.ReplaceAll(manifest, []byte("${1}http://"+ln.Addr().String()+"/"))
	// The validator takes the plugin's name from the file's.
	path := filepath.Join(work, *plugin+".yaml")
	if err := os.WriteFile(path, local, 0o600); err != nil { //nolint:gosec // G703: a file in our own temporary directory, named by the -plugin flag
		return err
	}
	// kubectl finds krew as the plugin kubectl-krew on PATH.
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		return err
	}
	for link, target := range map[string]string{"kubectl-krew": *krew, "kubectl": *kubectl} {
		abs, err := filepath.Abs(target)
		if err != nil {
			return err
		}
		if err := os.Symlink(abs, filepath.Join(bin, link)); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, *validator, "-manifest", path) //nolint:gosec // the caller's own tool
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KREW_NO_UPGRADE_CHECK=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("validate-krew-manifest refused %s/krew/%s.yaml: %w", *dist, *plugin, err)
	}
	fmt.Printf("krewcheck: krew's validator installed %s from every platform's archive\n", *plugin)

	// Installed for this machine as a user would, `kubectl pinniped` must
	// work: krew links only the front (as kubectl-pinniped), which has to
	// find pinniped-engine through that link.
	root := filepath.Join(work, "krew-root")
	env := append(os.Environ(), "KREW_ROOT="+root, "KREW_NO_UPGRADE_CHECK=1",
		"PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	kubectlBin := filepath.Join(bin, "kubectl")                                            // the pinned one, not whatever PATH has
	install := exec.CommandContext(ctx, kubectlBin, "krew", "install", "--manifest", path) //nolint:gosec // the caller's own tools
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl krew install --manifest %s: %w\n%s", path, err, out)
	}
	version := exec.CommandContext(ctx, kubectlBin, *plugin, "version") //nolint:gosec // the caller's own tools
	version.Env = env
	out, err := version.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s version after krew install: %w\n%s", *plugin, err, out)
	}
	if !strings.Contains(string(out), "go1.") {
		return fmt.Errorf("kubectl %s version after krew install printed no version:\n%s", *plugin, out)
	}
	fmt.Printf("krewcheck: installed by krew, kubectl %s runs its engine:\n%s", *plugin, out)
	return nil
}
