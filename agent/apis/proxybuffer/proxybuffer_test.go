package proxybuffer

import "testing"

func TestPoolLendsFullBuffersAndDropsStrangers(t *testing.T) {
	var p Pool
	b := p.Get()
	if len(b) != Size || cap(b) != Size {
		t.Fatalf("Get: len %d cap %d, want %d", len(b), cap(b), Size)
	}
	p.Put(b[:10]) // the reverse proxy may hand back a resliced buffer
	if got := p.Get(); len(got) != Size {
		t.Fatalf("Get after Put of a resliced buffer: len %d, want %d", len(got), Size)
	}
	p.Put(make([]byte, 100))
	for range 10 {
		if got := p.Get(); len(got) != Size {
			t.Fatalf("a buffer of another size was lent: len %d", len(got))
		}
	}
}

func BenchmarkGetPut(b *testing.B) {
	var p Pool
	b.ReportAllocs()
	for b.Loop() {
		p.Put(p.Get())
	}
}
