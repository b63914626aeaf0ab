package command

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// klog.Fatal exits the process at once: the lines batched before it, and
// its own, must reach stderr anyway. The test runs itself as the process
// that dies.
func TestKlogFatalFlushesTheBatch(t *testing.T) {
	if os.Getenv("PINNIPED_TEST_KLOG_FATAL") == "1" {
		log, _, err := setUpLogging(os.Stderr, "json", "info")
		if err != nil {
			os.Exit(3)
		}
		log.Info("a line before the end")
		klog.Fatalf("the last words")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKlogFatalFlushesTheBatch$")
	cmd.Env = append(os.Environ(), "PINNIPED_TEST_KLOG_FATAL=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 255 {
		t.Fatalf("the process did not die by klog.Fatal: %v\n%s", err, out)
	}
	for _, want := range []string{"a line before the end", "the last words"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%q lost from the output:\n%s", want, out)
		}
	}
}
