//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

type doctorCheck struct {
	Name, Status, Detail, Fix string
}

type doctorReport struct {
	Context string
	Checks  []doctorCheck
	exit    int
	text    string
}

func (r doctorReport) check(t *testing.T, name string) doctorCheck {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("doctor has no check %q:\n%s", name, r.text)
	return doctorCheck{}
}

// runDoctor runs `pinniped doctor -o json` with env (the bed's admin
// kubeconfig is not in it: doctor reads the kubeconfig env names).
func runDoctor(t *testing.T, pinniped string, env []string, args ...string) doctorReport {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), pinniped, append([]string{"doctor", "-o", "json", "--timeout=15s"}, args...)...)
	cmd.Env = append(BedEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var r doctorReport
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("doctor: %v\n%s", err, stderr.String())
	}
	if jerr := json.Unmarshal(stdout.Bytes(), &r); jerr != nil {
		t.Fatalf("doctor's JSON: %v (exit %d)\n%s\n%s", jerr, r.exit, stdout.String(), stderr.String())
	}
	for _, c := range r.Checks {
		r.text += fmt.Sprintf("%-5s %-23s %s %s\n", c.Status, c.Name, c.Detail, c.Fix)
	}
	return r
}

// editKubeconfig writes a copy of kubeconfig with its exec entry changed by edit.
func editKubeconfig(t *testing.T, kubeconfig string, edit func(e *clientcmdapi.ExecConfig)) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	edit(user.Exec)
	out := filepath.Join(t.TempDir(), "edited.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// setArg replaces the value of --name (or adds it) in args.
func setArg(args []string, name, value string) []string {
	out := make([]string, 0, len(args)+1)
	found := false
	for _, a := range args {
		if strings.HasPrefix(a, name+"=") {
			a, found = name+"="+value, true
		}
		out = append(out, a)
	}
	if !found {
		out = append(out, name+"="+value)
	}
	return out
}

// TestDoctor: `pinniped doctor` on a healthy context says OK for every link it can
// check, and for each link broken on the real bed, in turn, the check named for it
// fails (or warns) with a fix that names what to change.
func TestDoctor(t *testing.T) {
	pinniped := installAgent(t)
	cfg := Bed.Config()
	alice := testbed.DexUsers[0]
	_, _ = RunE(nil, pinniped, "logout", "--all")
	// On the managed profile get kubeconfig picks the impersonation proxy once it is
	// advertised (before that, the CSR strategy through the API server); wait for
	// it, so that the kubeconfig goes through it and doctor checks it.
	viaProxy := ""
	if cfg.Profile == testbed.ProfileManaged {
		viaProxy = waitProxyStrategy(t, "the impersonation proxy is advertised", proxySucceeds).Endpoint
	}
	kubeconfig := userKubeconfig(t, pinniped, "--oidc-flow=password")
	if got := kubeconfigServer(t, kubeconfig); viaProxy != "" && got != viaProxy {
		t.Fatalf("the kubeconfig's server is %s, not the impersonation proxy %s", got, viaProxy)
	}
	config := t.TempDir()
	env := []string{"KUBECONFIG=" + kubeconfig, "XDG_CONFIG_HOME=" + config, "PINNIPED_USERNAME=" + alice.Email}
	admin := "--admin-kubeconfig=" + cfg.AdminKubeconfig()
	// A login works as soon as the agent has built the authenticator; its status is
	// written after that, by the leader.
	waitPhase(t, "jwtauthenticator", "dex", "Ready")

	t.Run("before a login: the login is the one thing missing", func(t *testing.T) {
		r := runDoctor(t, pinniped, env)
		if r.exit != 0 {
			t.Fatalf("doctor failed before a login:\n%s", r.text)
		}
		if c := r.check(t, "cache.credential"); c.Status != "WARN" || !strings.Contains(c.Fix, "kubectl get ns") {
			t.Errorf("cache.credential before a login: %+v", c)
		}
		for _, name := range []string{"you.identity", "you.permissions", "agent.apiservice"} {
			if c := r.check(t, name); c.Status != "SKIP" {
				t.Errorf("%s before a login: %+v", name, c)
			}
		}
	})

	out, err := RunE(append(env, "PINNIPED_PASSWORD="+alice.Password), "kubectl", "get", "namespaces")
	if err != nil || !strings.Contains(out, "kube-system") {
		t.Fatalf("log in as alice: %v\n%s", err, out)
	}

	t.Run("healthy and logged in: every link OK", func(t *testing.T) {
		r := runDoctor(t, pinniped, env, admin)
		// What cannot apply here: a password login has no authorize request to try,
		// Dex is not a Supervisor, and the kubeadm profile has no proxy.
		notHere := map[string]bool{"issuer.client": true, "issuer.upstream": true, "agent.proxy": cfg.Profile == testbed.ProfileKubeadm}
		// Go stamps a build's commit only in a clone (a .git directory; not in a git
		// worktree), and a build from a tree with changes cannot be told from another.
		gitDir, _ := os.Stat(filepath.Join(RepoRoot(t), ".git"))
		stamped := gitDir != nil && gitDir.IsDir()
		for _, c := range r.Checks {
			switch {
			case c.Status == "OK":
			case c.Status == "SKIP" && notHere[c.Name]:
			case c.Status == "SKIP" && c.Name == "exec.versions" && (!stamped || strings.Contains(c.Detail, "local changes")):
			default:
				t.Errorf("%s on a healthy context: %s %s %s", c.Name, c.Status, c.Detail, c.Fix)
			}
		}
		if d := r.check(t, "you.identity").Detail; !strings.Contains(d, alice.Email) || !strings.Contains(d, "developers") {
			t.Errorf("you.identity: %s", d)
		}
		if d := r.check(t, "you.permissions").Detail; !strings.Contains(d, "list pods: yes") || !strings.Contains(d, "list secrets: no") {
			t.Errorf("you.permissions (alice may view): %s", d)
		}
		if r.exit != 0 {
			t.Errorf("doctor exited %d on a healthy context", r.exit)
		}
		if t.Failed() {
			t.Logf("the report:\n%s", r.text)
		}

		// Without an administrator's kubeconfig, what alice may not read is skipped
		// and says how to see it.
		r = runDoctor(t, pinniped, env)
		for _, name := range []string{"agent.apiservice", "agent.credentialissuer", "agent.authenticator"} {
			if c := r.check(t, name); c.Status != "SKIP" || !strings.Contains(c.Detail, "--admin-kubeconfig") {
				t.Errorf("%s as alice: %+v", name, c)
			}
		}
	})

	// kubectl 1.35 runs only the credential plugins its kuberc allows when
	// it says credentialPluginPolicy: Allowlist, spelled name: in 1.35 and
	// command: from 1.36 (both, different, is an error there). The bed's
	// own kubectl, of the bed's version, runs the kubeconfig pinniped
	// wrote under each form, and doctor agrees with it each time.
	t.Run("kubectl's credential plugin allowlist", func(t *testing.T) {
		minor := cfg.KubeMinorNumber()
		if minor < 35 {
			t.Skipf("kubectl 1.%d has no credential plugin policy (kuberc's credentialPluginPolicy is from 1.35)", minor)
		}
		front := execCommand(t, kubeconfig)
		kuberc := filepath.Join(t.TempDir(), "kuberc")
		kenv := append(append([]string{}, env...), "KUBERC="+kuberc)
		cases := []struct {
			name, entry string
			allowed     bool   // by this kubectl
			doctor      string // doctor's verdict
		}{
			{"pinniped listed by name", "- name: " + front, true, "OK"},
			{"only another plugin listed", "- name: /usr/local/bin/kubelogin", false, "FAIL"},
			// 1.35 knows only name (kubelogin here); 1.36 refuses the entry.
			{"both spellings, different", "- name: /usr/local/bin/kubelogin\n  command: " + front, false, "FAIL"},
			// 1.35 reads an empty entry and refuses every plugin; 1.36
			// reads command. Doctor cannot know which kubectl will run:
			// it warns, naming the spelling both read.
			{"pinniped listed by command", "- command: " + front, minor >= 36, "WARN"},
		}
		for _, tc := range cases {
			if err := os.WriteFile(kuberc, []byte("apiVersion: kubectl.config.k8s.io/v1beta1\nkind: Preference\n"+
				"credentialPluginPolicy: Allowlist\ncredentialPluginAllowlist:\n"+tc.entry+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := RunE(kenv, "kubectl", "get", "namespaces")
			if ran := err == nil && strings.Contains(out, "kube-system"); ran != tc.allowed {
				t.Errorf("%s: kubectl 1.%d ran pinniped: %v, want %v (%v)\n%s", tc.name, minor, ran, tc.allowed, err, out)
			}
			if c := runDoctor(t, pinniped, kenv).check(t, "exec.policy"); c.Status != tc.doctor {
				t.Errorf("%s: doctor says %s %s %s, want %s (kubectl 1.%d ran it: %v)", tc.name, c.Status, c.Detail, c.Fix, tc.doctor, minor, tc.allowed)
			}
		}
	})

	otherCA := base64.StdEncoding.EncodeToString(mustRead(t, cfg.ClusterCAFile()))
	engineless := filepath.Join(t.TempDir(), "pinniped")
	Run(t, nil, "cp", pinniped, engineless)
	broken := func(edit func(e *clientcmdapi.ExecConfig)) string { return editKubeconfig(t, kubeconfig, edit) }
	for _, tc := range []struct {
		name, kubeconfig string
		env              []string
		check, status    string
		fix              []string
	}{
		{name: "the front is not where the kubeconfig says",
			kubeconfig: broken(func(e *clientcmdapi.ExecConfig) { e.Command = filepath.Join(t.TempDir(), "pinniped") }),
			check:      "exec.front", status: "FAIL", fix: []string{"pinniped"}},
		{name: "pinniped-engine is not beside the front",
			kubeconfig: broken(func(e *clientcmdapi.ExecConfig) { e.Command = engineless }),
			check:      "exec.engine", status: "FAIL", fix: []string{"pinniped-engine"}},
		{name: "the issuer's CA is not the one the kubeconfig trusts",
			kubeconfig: broken(func(e *clientcmdapi.ExecConfig) { e.Args = setArg(e.Args, "--ca-bundle-data", otherCA) }),
			check:      "issuer.tls", status: "FAIL", fix: []string{"--oidc-ca-bundle"}},
		{name: "the issuer spelled with a trailing slash",
			kubeconfig: broken(func(e *clientcmdapi.ExecConfig) { e.Args = setArg(e.Args, "--issuer", cfg.DexIssuer()+"/") }),
			check:      "issuer.discovery", status: "FAIL", fix: []string{"calls itself", cfg.DexIssuer()}},
		{name: "a client id the provider does not know",
			kubeconfig: broken(func(e *clientcmdapi.ExecConfig) {
				e.Args = setArg(setArg(e.Args, "--client-id", "nobody-registered-this"), "--flow", "browser")
			}),
			check: "issuer.client", status: "FAIL", fix: []string{"nobody-registered-this"}},
		{name: "the agent's API under a suffix that is not installed",
			kubeconfig: broken(func(e *clientcmdapi.ExecConfig) {
				e.Args = setArg(e.Args, "--concierge-api-group-suffix", "not-installed.example.com")
			}),
			check: "agent.api", status: "FAIL", fix: []string{"not-installed.example.com"}},
		{name: "an authenticator that does not exist",
			kubeconfig: broken(func(e *clientcmdapi.ExecConfig) {
				e.Args = setArg(e.Args, "--concierge-authenticator-name", "no-such-authenticator")
			}),
			check: "agent.authenticator", status: "FAIL", fix: []string{"no-such-authenticator"}},
		{name: "no D-Bus session: credentials in files",
			kubeconfig: kubeconfig, env: []string{"DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR="},
			check: "cache.backend", status: "WARN", fix: []string{"keyring", "--credential-cache=file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := append([]string{"KUBECONFIG=" + tc.kubeconfig, "XDG_CONFIG_HOME=" + config, "PINNIPED_USERNAME=" + alice.Email}, tc.env...)
			r := runDoctor(t, pinniped, e, admin)
			c := r.check(t, tc.check)
			if c.Status != tc.status {
				t.Fatalf("%s: %s, want %s\n%s", tc.check, c.Status, tc.status, r.text)
			}
			for _, want := range tc.fix {
				if !strings.Contains(c.Fix, want) {
					t.Errorf("%s's fix does not name %q: %s\n%s", tc.check, want, c.Fix, r.text)
				}
			}
			if (tc.status == "FAIL") != (r.exit == 1) {
				t.Errorf("doctor exited %d with %s %s", r.exit, tc.check, c.Status)
			}
		})
	}

	t.Run("an authenticator in error names its condition", func(t *testing.T) {
		applyYAML(t, fmt.Sprintf(`apiVersion: authentication.concierge.pinniped.dev/v1alpha1
kind: JWTAuthenticator
metadata: {name: doctor-unreachable}
spec:
  issuer: https://%s:1/nowhere
  audience: pinniped-cli
`, cfg.NodeIP))
		t.Cleanup(func() { _, _ = RunE(nil, "kubectl", "delete", "jwtauthenticator", "doctor-unreachable") })
		waitPhase(t, "jwtauthenticator", "doctor-unreachable", "Error")
		kc := broken(func(e *clientcmdapi.ExecConfig) {
			e.Args = setArg(e.Args, "--concierge-authenticator-name", "doctor-unreachable")
		})
		r := runDoctor(t, pinniped, []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + config}, admin)
		c := r.check(t, "agent.authenticator")
		if c.Status != "FAIL" || !strings.Contains(c.Detail+c.Fix, "doctor-unreachable") || !strings.Contains(c.Detail+c.Fix, "=False") {
			t.Fatalf("agent.authenticator: %+v\n%s", c, r.text)
		}
	})

	t.Run("the agent down: its API and APIServices", func(t *testing.T) {
		// Last: it takes the agent away and brings it back.
		replicas := Kubectl(t, "-n", "pinniped", "get", "deployment", "pinniped-agent", "-o", "jsonpath={.spec.replicas}")
		Kubectl(t, "-n", "pinniped", "scale", "deployment", "pinniped-agent", "--replicas=0")
		t.Cleanup(func() {
			Kubectl(t, "-n", "pinniped", "scale", "deployment", "pinniped-agent", "--replicas="+replicas)
			Kubectl(t, "-n", "pinniped", "rollout", "status", "deployment", "pinniped-agent", "--timeout=2m")
		})
		// Through the impersonation proxy (managed) the cluster's server is the
		// agent itself: with it gone, cluster.api fails, saying the agent may be
		// down, and agent.api, on the same server, is not asked again.
		var r doctorReport
		// Replicas told to stop keep serving a few seconds (for endpoints to drain).
		Eventually(t, 2*time.Minute, "the agent's API and APIServices to be gone", func(context.Context) error {
			r = runDoctor(t, pinniped, env, admin)
			want := map[string]string{"agent.apiservice": "FAIL", "agent.api": "FAIL"}
			if viaProxy != "" {
				want["cluster.api"], want["agent.api"] = "FAIL", "SKIP"
			}
			var wrong []string
			for _, name := range []string{"cluster.api", "agent.api", "agent.apiservice"} {
				if c := r.check(t, name); want[name] != "" && c.Status != want[name] {
					wrong = append(wrong, fmt.Sprintf("%s %s, want %s", name, c.Status, want[name]))
				}
			}
			if len(wrong) > 0 {
				return fmt.Errorf("%s\n%s", strings.Join(wrong, "; "), r.text)
			}
			return nil
		})
		if c := r.check(t, "cluster.api"); viaProxy != "" && !strings.Contains(c.Fix, "the agent may be down") {
			t.Errorf("cluster.api does not say the agent may be down: %+v", c)
		}
		if c := r.check(t, "agent.apiservice"); !strings.Contains(c.Fix, "concierge.pinniped.dev is not available") {
			t.Errorf("agent.apiservice does not name the APIService: %+v", c)
		}
		if r.exit != 1 {
			t.Errorf("doctor exited %d with the agent down", r.exit)
		}
	})
}

// kubeconfigServer is the server of the kubeconfig's current context.
func kubeconfigServer(t *testing.T, kubeconfig string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server
}

// execCommand is the command of the kubeconfig's exec credential plugin.
func execCommand(t *testing.T, kubeconfig string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if user == nil || user.Exec == nil {
		t.Fatalf("%s has no exec plugin", kubeconfig)
	}
	return user.Exec.Command
}
