//go:build linux

package localuser

import (
	"net"
	"os"
	"strings"
	"testing"
)

// TestUIDOfOurOwnConnection: a real loopback connection from this process
// is found in the kernel's table, as ours, over IPv4 and IPv6.
func TestUIDOfOurOwnConnection(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v (no such loopback here)", addr, err)
			continue
		}
		accepted := make(chan net.Conn, 1)
		go func() { c, _ := ln.Accept(); accepted <- c }()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server := <-accepted
		uid, err := UID(server.LocalAddr(), server.RemoteAddr())
		if err != nil || uid != os.Getuid() {
			t.Errorf("%s: UID = %d, %v; want %d", addr, uid, err, os.Getuid())
		}
		_ = client.Close()
		_ = server.Close()
		_ = ln.Close()
	}
}

func TestUIDRefusesWhatItCannotFind(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A port pair no socket has.
	_, err = UID(ln.Addr(), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1})
	if err == nil || !strings.Contains(err.Error(), "no socket") {
		t.Errorf("err = %v; want no socket", err)
	}
	_, err = UID(ln.Addr(), &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1})
	if err == nil || !strings.Contains(err.Error(), "not from this machine's loopback") {
		t.Errorf("err = %v; want not loopback", err)
	}
}

// TestParseTable reads a table as the kernel writes it, with another
// user's socket among ours.
func TestParseTable(t *testing.T) {
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:B86B 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:D431 0100007F:B86B 01 00000000:00000000 00:00000000 00000000  1234        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:B86B 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 20 4 30 10 -1
`)
	server := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0xB86B}
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0xD431}
	uid, found, err := parse(table, client, server)
	if err != nil || !found || uid != 1234 {
		t.Fatalf("parse = %d, %v, %v; want the client socket's uid 1234", uid, found, err)
	}
	v6 := []byte(`  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:B86B 00000000000000000000000001000000:D431 01 00000000:00000000 00:00000000 00000000  1000        0 3 1
   1: 00000000000000000000000001000000:D431 00000000000000000000000001000000:B86B 01 00000000:00000000 00:00000000 00000000  4321        0 3 1
`)
	server.IP, client.IP = net.IPv6loopback, net.IPv6loopback
	if uid, found, err := parse(v6, client, server); err != nil || !found || uid != 4321 {
		t.Fatalf("parse v6 = %d, %v, %v; want 4321", uid, found, err)
	}
	closed := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   1: 0100007F:D431 0100007F:B86B 05 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
`)
	server.IP, client.IP = net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 1)
	if uid, found, err := parse(closed, client, server); err == nil || found {
		t.Fatalf("a client socket already closed (FIN_WAIT2, uid 0): %d, %v, %v; want an error, never uid 0", uid, found, err)
	}
	if _, _, err := parse([]byte("header\n 0: zz:1 00:0 01 x x x 1000\n"), client, server); err == nil {
		t.Error("a line that does not parse was skipped; it must be an error (fail closed)")
	}
}
