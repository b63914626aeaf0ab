//go:build !linux

package localuser

import "net"

// UID is not available here: macOS and Windows have no /proc socket table
// (macOS's LOCAL_PEERCRED is for Unix sockets only), so the local secret is
// the only check. docs/local-proxy.md says so.
func UID(net.Addr, net.Addr) (int, error) { return 0, ErrUnsupported }
