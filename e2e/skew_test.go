//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/pinniped-kit/pinniped/e2e/testbed"
)

// e2e/tools/supervisor's ClockOffsetEnv and AccessTokenLifetimeEnv (a
// module of its own, which this one does not import).
const (
	supervisorClockOffsetEnv         = "PINNIPED_E2E_SUPERVISOR_CLOCK_OFFSET"
	supervisorAccessTokenLifetimeEnv = "PINNIPED_E2E_SUPERVISOR_ACCESS_TOKEN_LIFETIME"
)

// skewAccessTokenLifetime is the access tokens' lifetime while the clock is
// skewed: short, so that the wait for one to expire is short.
const skewAccessTokenLifetime = 40 * time.Second

// skewSupervisor starts the bed's test Supervisor again with its ID tokens'
// clock offset from the machine's (which the agent and the CLI read) and
// access tokens that live skewAccessTokenLifetime, and as it was when the
// test ends.
func skewSupervisor(t *testing.T, offset string) {
	t.Helper()
	if err := Bed.Stop("supervisor", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Bed.Stop("supervisor", 5*time.Second); err != nil {
			t.Error(err)
		}
		if err := Bed.Start("supervisor"); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 60*time.Second, "the Supervisor serves again without an offset", serves(Bed.Config().SupervisorIssuer()))
	})
	if err := Bed.StartWithEnv("supervisor", supervisorClockOffsetEnv+"="+offset,
		supervisorAccessTokenLifetimeEnv+"="+skewAccessTokenLifetime.String()); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 60*time.Second, "the Supervisor serves with a clock offset of "+offset, serves(Bed.Config().SupervisorIssuer()))
	log, err := os.ReadFile(Bed.Config().LogFile("supervisor"))
	if err != nil {
		t.Fatal(err)
	}
	if runs := strings.Split(string(log), "==> "); !strings.Contains(runs[len(runs)-1], "clock offset "+offset) {
		t.Fatalf("the Supervisor's last run does not report the clock offset %s; its log ends:\n%s", offset, runs[len(runs)-1])
	}
}

// withLoginArgs is kubeconfig with args added to its exec plugin's.
func withLoginArgs(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	user.Exec.Args = append(user.Exec.Args, args...)
	out := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClockSkew: the Supervisor's clock 2 minutes ahead of and behind the
// agent's and the CLI's, and its JWTAuthenticator allowing that skew
// (spec.allowedClockSkew). Its ID tokens (the cluster-scoped ones live 2
// minutes) must still log kubectl in: a password login, then, with the
// session cached and no cluster credential, exchanges and a refresh. The CLI-to-cluster direction cannot be played here (one kernel
// clock for both); its unit tests are in cli/login (TestClusterClockSkew).
func TestClockSkew(t *testing.T) {
	// The tokens' times are checked by the same code whichever way the
	// cluster signs certificates; the waits for the access token to expire
	// are paid in one profile.
	if Bed.Config().Profile != testbed.ProfileKubeadm {
		t.Skipf("clock skew is tested in the kubeadm profile only; the %s profile checks tokens with the same code", Bed.Config().Profile)
	}
	pinniped := installAgent(t)
	alice := testbed.DexUsers[0]
	for _, offset := range []string{"2m0s", "-2m0s"} {
		t.Run("Supervisor "+offset, func(t *testing.T) {
			skewSupervisor(t, offset)
			// Skew between an issuer and the cluster is the administrator's to
			// allow: without it the agent refuses, as kube-apiserver, a token past
			// its exp (2 minutes behind, the Supervisor's 2-minute tokens arrive
			// expired) and one issued over a minute ahead. 3m (the most there is)
			// covers 2 minutes plus the login's way to the agent.
			// The authenticator is made after the restart: the test Supervisor
			// signs with a new key each time it starts, and the agent fetches an
			// issuer's keys at most once per jwt.KeyRefetchInterval (10 s), so a
			// key that appears within 10 s of the authenticator's first fetch is
			// refused until that window has passed.
			supervisorAuthenticatorWithSkew(t, "3m")
			_, _ = RunE(nil, pinniped, "logout", "--all")
			kc := supervisorKubeconfig(t, pinniped, "--upstream-identity-provider-name="+testbed.SupervisorLDAPIDP)
			base := []string{"KUBECONFIG=" + kc, "XDG_CONFIG_HOME=" + t.TempDir(), "PINNIPED_USERNAME=" + alice.Email}
			want := "ldap:" + alice.Email
			got, stderr, err := whoami(t, append(base, "PINNIPED_PASSWORD="+alice.Password))
			if err != nil || got != want {
				t.Fatalf("login: whoami %q, want %q (%v)\n%s", got, want, err, stderr)
			}
			// With the cluster credential never cached (upstream's
			// --credential-cache=""; the session still is), every call
			// exchanges a fresh 2-minute token: from the cached access
			// token while it has over 10 s left (the CLI reads its
			// expires_in on its own clock: opaque access tokens carry no
			// skewed times), and after a refresh once it has not. No
			// password either way.
			nocache := withLoginArgs(t, kc, "--credential-cache=")
			base[0] = "KUBECONFIG=" + nocache
			start := time.Now()
			for _, wait := range []time.Duration{0, 10 * time.Second, skewAccessTokenLifetime - 10*time.Second} {
				time.Sleep(wait)
				got, stderr, err := whoami(t, base)
				if err != nil || got != want {
					t.Fatalf("%s after the login: whoami %q, want %q (%v)\n%s", time.Since(start).Round(time.Second), got, want, err, stderr)
				}
			}
		})
	}
}
