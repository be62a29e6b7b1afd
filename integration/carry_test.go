package integration

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// goroutineID returns the id of the calling goroutine, from its stack trace's first line.
func goroutineID() uint64 {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line = bytes.TrimPrefix(line, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(line[:bytes.IndexByte(line, ' ')]), 10, 64)
	return id
}

// scriptGoroutines is a go-redis hook that records the goroutine on which each script call is made.
type scriptGoroutines struct {
	mu  sync.Mutex
	ids []uint64
}

func (h *scriptGoroutines) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptGoroutines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.mu.Lock()
			h.ids = append(h.ids, goroutineID())
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *scriptGoroutines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// take returns the goroutines recorded since the last take.
func (h *scriptGoroutines) take() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := h.ids
	h.ids = nil
	return ids
}

// TestCallerRunsItsOwnCall: an uncontended Lock and Unlock whose context can never end make their
// Redis calls on the caller's goroutine (no handoff to another goroutine and back); with a context
// that can end, the calls are made on another goroutine, so that the caller can give up while Redis
// does not answer.
func TestCallerRunsItsOwnCall(t *testing.T) {
	_, client, c := setup(t)
	h := &scriptGoroutines{}
	client.AddHook(h)
	m := c.Mutex("carry:" + t.Name())
	mustLock(t, m) // the lock actor starts; it is idle from now on
	mustUnlock(t, m)
	h.take()

	self := goroutineID()
	ctx := context.Background()
	// The actor may still be finishing the turn of the previous answer on another goroutine when the
	// next call comes (after the warm-up, or on a loaded machine): that call then goes the usual way.
	// The answer of a carried call is settled on the caller's goroutine, so most cycles find it idle.
	carried := 0
	for range 20 {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		ids := h.take()
		if len(ids) != 2 {
			t.Fatalf("Lock+Unlock made %d script calls, want 2", len(ids))
		}
		if ids[0] == self && ids[1] == self {
			carried++
		}
	}
	if carried < 15 {
		t.Fatalf("with a context that never ends, %d Lock+Unlock of 20 made their script calls on the caller's goroutine, want most", carried)
	}

	cancellable, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := m.Lock(cancellable); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(cancellable); err != nil {
		t.Fatal(err)
	}
	ids := h.take()
	if len(ids) != 2 || ids[0] == self || ids[1] == self {
		t.Fatalf("Lock+Unlock with a context that can end: script calls on goroutines %v, want 2 on others than the caller's (%d)", ids, self)
	}
}
