//go:build linux

// Package localusertest makes an HTTP request as another local user, for the
// tests of servers that serve only their own user (package localuser): a
// connection from a process of another uid is the one thing such a test
// cannot fake in-process. It runs the test binary again as that user; the
// test package's TestMain calls Main first, which makes the request in
// that child and exits.
package localusertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Nobody is the other user GetAs is usually given: nobody (uid and gid
// 65534), who owns nothing a test could depend on.
const Nobody = 65534

// getEnv carries the URL to the child; its presence is what makes a test
// binary the child.
const getEnv = "PINNIPED_PEERTEST_GET"

// Response is what the other user's request got.
type Response struct {
	// UID is the child's uid, checked by GetAs.
	UID    int
	Status int
	Header http.Header
	Body   string
	// Err is why the request failed (Status is then 0).
	Err string
}

// Main makes the request and exits when this process is GetAs's child;
// otherwise it returns at once. Call it first in TestMain.
func Main() {
	u := os.Getenv(getEnv)
	if u == "" {
		return
	}
	out := Response{UID: os.Getuid()}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(u) //nolint:noctx,gosec // the child has no context but its timeout; u is the test's own loopback URL
	if err != nil {
		out.Err = err.Error()
	} else {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		out.Status, out.Header, out.Body = resp.StatusCode, resp.Header, string(b)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(2)
	}
	os.Exit(0)
}

// GetAs fetches u as uid (its gid the same number, no supplementary
// groups) and returns what that user got. The test binary, which must
// call Main in its TestMain, is run from a copy: the one go test built
// sits in a directory only its builder may enter. Changing user needs
// root; without it the test is skipped, since nothing else can stand in
// for another user's connection.
func GetAs(t *testing.T, uid int, u string) Response {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a request as another local user needs root")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("find this test binary: %v", err)
	}
	dir, err := os.MkdirTemp("", "localusertest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // the other user must enter it to run the copy
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "as-another-user")
	if err := copyFile(self, bin); err != nil {
		t.Fatalf("copy this test binary for uid %d: %v", uid, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin) //nolint:gosec // this test binary's own copy
	cmd.Dir = dir
	cmd.Env = []string{getEnv + "=" + u}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}} //nolint:gosec // uid is a test's small constant
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("the request as uid %d did not run: %v\n%s", uid, err, stderr.Bytes())
	}
	var r Response
	if err := json.Unmarshal(stdout, &r); err != nil {
		t.Fatalf("the request as uid %d said %q (%v); does the test binary's TestMain call localusertest.Main?\n%s", uid, stdout, err, stderr.Bytes())
	}
	if r.UID != uid {
		t.Fatalf("the request meant for uid %d ran as uid %d", uid, r.UID)
	}
	return r
}

func copyFile(from, to string) error {
	in, err := os.Open(from) //nolint:gosec // this test binary
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755) //nolint:gosec // the other user must run it
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
