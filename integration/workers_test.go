package integration

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
)

// poolWorkers counts the live goroutines started by a coordinator's worker pool (actors.NewWorkerPool),
// from a dump of every goroutine's stack: each names the function that created it.
func poolWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("created by github.com/lockwarden/lockwarden/actors.NewWorkerPool in goroutine"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestWithWorkers: New starts as many pool workers as WithWorkers asks for (16 per GOMAXPROCS by
// default), Close ends them all, and a coordinator with a single worker serves many goroutines on many
// locks at once, since work beyond the pool runs on goroutines of its own. New refuses a size below 1
// or above MaxWorkers with ErrInvalidOption.
func TestWithWorkers(t *testing.T) {
	_, client, _ := setup(t)
	for _, tc := range []struct {
		name string
		opts []coordinator.Option
		want int
	}{
		{"default", nil, 16 * runtime.GOMAXPROCS(0)},
		{"1", []coordinator.Option{coordinator.WithWorkers(1)}, 1},
		{"64", []coordinator.Option{coordinator.WithWorkers(64)}, 64},
		{"MaxWorkers", []coordinator.Option{coordinator.WithWorkers(coordinator.MaxWorkers)}, coordinator.MaxWorkers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := poolWorkers()
			c, err := coordinator.New(client, tc.opts...)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer c.Close()
			if got := poolWorkers() - before; got != tc.want {
				t.Fatalf("New started %d pool workers, want %d", got, tc.want)
			}

			// More lockers than workers, each on locks of its own and on a shared one.
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					lockCycles(t, c.Mutex(fmt.Sprintf("%s:%d", t.Name(), w)), 20)
					lockCycles(t, c.Mutex(t.Name()), 5)
				})
			}
			wg.Wait()

			_ = c.Close()
			// Close waits for every worker to be done; a worker that is done may still be on its way
			// out of its goroutine for a moment, and still in the dump.
			deadline := time.Now().Add(5 * time.Second)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for got := poolWorkers() - before; got != 0; got = poolWorkers() - before {
				if time.Now().After(deadline) {
					t.Fatalf("%d pool workers left 5s after Close, want 0", got)
				}
				<-tick.C
			}
		})
	}
	for _, n := range []int{0, -1, coordinator.MaxWorkers + 1} {
		before := poolWorkers()
		c, err := coordinator.New(client, coordinator.WithWorkers(n))
		if !errors.Is(err, coordinator.ErrInvalidOption) || c != nil {
			if c != nil {
				_ = c.Close()
			}
			t.Fatalf("New(WithWorkers(%d)) = %v, %v; want nil, ErrInvalidOption", n, c, err)
		}
		if got := poolWorkers() - before; got != 0 {
			t.Fatalf("New(WithWorkers(%d)) refused, but started %d pool workers", n, got)
		}
	}
}
