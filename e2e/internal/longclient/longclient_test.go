package longclient

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// keep is what decides what a cut is; these runs have no cluster, only
// streams that fail in each way a real one can.
func TestKeep(t *testing.T) {
	const stall = 400 * time.Millisecond
	// progressing runs until its context ends, with progress every 50 ms.
	progressing := func(ctx context.Context, alive func()) error {
		for {
			alive()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	for _, tc := range []struct {
		name string
		// open gets the number of the attempt, from 1.
		open     func(n int32, ctx context.Context, alive func()) error
		wantCuts []string
	}{
		{"a stream that runs to the end is not cut", func(_ int32, ctx context.Context, alive func()) error {
			return progressing(ctx, alive)
		}, nil},
		{"an error is a cut, and the stream is opened again", func(n int32, ctx context.Context, alive func()) error {
			if n == 1 {
				alive()
				return errors.New("connection reset by peer")
			}
			return progressing(ctx, alive)
		}, []string{"connection reset by peer"}},
		{"a clean end before the run's is a cut", func(n int32, ctx context.Context, alive func()) error {
			if n == 1 {
				return nil
			}
			return progressing(ctx, alive)
		}, []string{"ended"}},
		{"no progress is a cut, though nothing failed", func(n int32, ctx context.Context, alive func()) error {
			if n == 1 {
				alive()
				<-ctx.Done() // a stream that says nothing more until it is closed
				return ctx.Err()
			}
			return progressing(ctx, alive)
		}, []string{"no progress for 400ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{progress: map[string]int{}, start: time.Now(), stall: stall}
			ctx, cancel := context.WithTimeout(context.Background(), 2*reopenWait+stall+time.Second)
			defer cancel()
			var attempts atomic.Int32
			r.keep(ctx, "s", func(ctx context.Context, alive func()) error {
				return tc.open(attempts.Add(1), ctx, alive)
			})
			rep := r.report()
			var got []string
			for _, c := range rep.Cuts {
				if c.Stream != "s" {
					t.Errorf("cut of stream %q", c.Stream)
				}
				got = append(got, c.Reason)
			}
			if strings.Join(got, "|") != strings.Join(tc.wantCuts, "|") {
				t.Errorf("cuts %q, want %q\n%s", got, tc.wantCuts, rep.Summary())
			}
			if rep.Progress["s"] == 0 {
				t.Errorf("no progress counted: %v", rep.Progress)
			}
			if want := int32(len(tc.wantCuts) + 1); attempts.Load() != want {
				t.Errorf("opened %d times, want %d (once, and again after each cut)", attempts.Load(), want)
			}
		})
	}
}
