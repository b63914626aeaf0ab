// Package proxybuffer lends the buffers both pinniped proxies (the agent's
// impersonation proxy and the CLI's local credential proxy) copy response
// bodies through. Without a pool, net/http/httputil's reverse proxy makes
// a new 32 KiB buffer for every response; through a proxy under load that
// was half of all the bytes it allocated, and the garbage collection that
// followed. Standard library only: the CLI links it.
package proxybuffer

import "sync"

// Size is the length of each buffer: the reverse proxy's own default.
const Size = 32 << 10

// Pool is an httputil.BufferPool. A buffer lent again still holds what the
// last response wrote into it; that never reaches another client, because
// the reverse proxy writes out only the bytes it has just read into it.
type Pool struct{ p sync.Pool }

// Get returns a buffer of Size bytes.
func (p *Pool) Get() []byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, Size)
}

// Put takes a buffer back; one of another size (not from Get) is dropped.
// Only the reverse proxy calls it, with what Get lent it.
func (p *Pool) Put(b []byte) {
	if cap(b) != Size {
		return
	}
	b = b[:Size]
	p.p.Put(&b)
}
