package localuser

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
)

// tables are the kernel's TCP socket tables of this network namespace.
var tables = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// UID is the uid owning the socket at the other end of the loopback
// connection from remote to local (as seen by the side that accepted it).
func UID(local, remote net.Addr) (int, error) {
	l, lok := local.(*net.TCPAddr)
	r, rok := remote.(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("not a TCP connection (%T to %T)", remote, local)
	}
	if !r.IP.IsLoopback() {
		return 0, fmt.Errorf("the connection comes from %s, not from this machine's loopback", r.IP)
	}
	for _, table := range tables {
		uid, found, err := find(table, r, l)
		if err != nil {
			return 0, err
		}
		if found {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("no socket from %s to %s in %s and %s (it closed at once, or it is in another network namespace)", r, l, tables[0], tables[1])
}

// find looks in one table for the socket whose local address is from and
// whose remote address is to.
func find(table string, from, to *net.TCPAddr) (int, bool, error) {
	b, err := os.ReadFile(table) //nolint:gosec // one of the two fixed /proc tables
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil // no IPv6 on this kernel
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", table, err)
	}
	return parse(b, from, to)
}

// parse reads a /proc/net/tcp{,6} table: a header line, then
// "sl local rem st tx:rx tr:when retrnsmt uid ...", addresses as
// HEXADDR:HEXPORT.
func parse(b []byte, from, to *net.TCPAddr) (int, bool, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan() // the header
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 8 {
			continue
		}
		local, err1 := parseAddr(string(f[1]))
		rem, err2 := parseAddr(string(f[2]))
		if err1 != nil || err2 != nil {
			return 0, false, fmt.Errorf("unexpected socket table line %q", sc.Text())
		}
		if !same(local, from) || !same(rem, to) {
			continue
		}
		// Only a socket its process still holds has an owner: once the
		// client closes its end (FIN_WAIT2, TIME_WAIT) the kernel shows
		// it with uid 0, which would name root. A request sent and
		// closed at once must not pass for root's (or be reported as
		// root's), so such a socket counts as not found.
		if st := string(f[3]); st != tcpEstablished && st != tcpCloseWait {
			return 0, false, fmt.Errorf("the client's socket is no longer open (state %s): its owner cannot be told", st)
		}
		uid, err := strconv.Atoi(string(f[7]))
		if err != nil {
			return 0, false, fmt.Errorf("unexpected uid in socket table line %q", sc.Text())
		}
		return uid, true, nil
	}
	return 0, false, sc.Err()
}

// TCP states in the socket tables (include/net/tcp_states.h): the ones in
// which the client's process still holds its socket.
const (
	tcpEstablished = "01"
	tcpCloseWait   = "08"
)

func same(a, b *net.TCPAddr) bool { return a.Port == b.Port && a.IP.Equal(b.IP) }

// parseAddr reads HEXADDR:HEXPORT. The kernel prints an address as 32-bit
// words in host byte order (one word for IPv4, four for IPv6) and the port
// as a number.
func parseAddr(s string) (*net.TCPAddr, error) {
	i := bytes.IndexByte([]byte(s), ':')
	if i < 0 {
		return nil, fmt.Errorf("no port in %q", s)
	}
	raw, err := hex.DecodeString(s[:i])
	if err != nil || (len(raw) != net.IPv4len && len(raw) != net.IPv6len) {
		return nil, fmt.Errorf("bad address in %q", s)
	}
	port, err := strconv.ParseUint(s[i+1:], 16, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", s)
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		binary.NativeEndian.PutUint32(ip[w:], binary.BigEndian.Uint32(raw[w:]))
	}
	return &net.TCPAddr{IP: ip, Port: int(port)}, nil
}
