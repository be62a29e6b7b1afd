package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// dataKeys returns the keys of the database less the process registry's (lockwarden_process:*),
// which coordinators write in the background while they run: what locks and primitives left.
func dataKeys(t *testing.T, client redis.Cmdable) []string {
	t.Helper()
	keys, err := client.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatalf("KEYS *: %v", err)
	}
	return slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, "lockwarden_process:") })
}

// newCoordinator returns a coordinator on client, closed at cleanup.
func newCoordinator(t *testing.T, client redis.UniversalClient, opts ...coordinator.Option) *coordinator.Coordinator {
	t.Helper()
	c, err := coordinator.New(client, opts...)
	if err != nil {
		t.Fatalf("coordinator.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// setup starts a redis-server for the test and returns a client and a coordinator on it.
func setup(t *testing.T, opts ...coordinator.Option) (*redistest.Server, *redis.Client, *coordinator.Coordinator) {
	t.Helper()
	srv := redistest.Start(t)
	client := srv.Client(t)
	return srv, client, newCoordinator(t, client, opts...)
}

// waitFor waits on ch until the deadline and fails the test when it passes.
func waitFor(t *testing.T, ch <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("%s did not happen within %v", what, within)
	}
}

// mustLock locks m or fails the test.
func mustLock(t *testing.T, m *coordinator.Mutex) {
	t.Helper()
	if err := m.Lock(t.Context()); err != nil {
		t.Fatalf("Lock(%s): %v", m.Name(), err)
	}
}

// mustUnlock unlocks m or fails the test.
func mustUnlock(t *testing.T, m *coordinator.Mutex) {
	t.Helper()
	if err := m.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock(%s): %v", m.Name(), err)
	}
}

func holdCount(t *testing.T, m *coordinator.Mutex) int {
	t.Helper()
	n, err := m.HoldCount(t.Context())
	if err != nil {
		t.Fatalf("HoldCount: %v", err)
	}
	return n
}

// lockAsync starts m.Lock(ctx) in a goroutine and returns the channel that receives its error.
func lockAsync(ctx context.Context, m *coordinator.Mutex) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- m.Lock(ctx) }()
	return errc
}

// lockCycles locks and unlocks m n times, reporting the first error with t.Error (it may run on any
// goroutine); it returns false after an error.
func lockCycles(t *testing.T, m *coordinator.Mutex, n int) bool {
	for range n {
		if err := m.Lock(t.Context()); err != nil {
			t.Error(err)
			return false
		}
		if err := m.Unlock(t.Context()); err != nil {
			t.Error(err)
			return false
		}
	}
	return true
}

// waitKeyGone polls until the key name is gone from Redis, and fails the test if it is still there
// within after since; it returns how long after since it went. what says what since was.
func waitKeyGone(t *testing.T, client redis.Cmdable, name string, since time.Time, within time.Duration, what string) time.Duration {
	t.Helper()
	for {
		n, err := client.Exists(t.Context(), name).Result()
		if err == nil && n == 0 {
			return time.Since(since)
		}
		if time.Since(since) > within {
			pttl, _ := client.PTTL(t.Context(), name).Result()
			t.Fatalf("the lost hold %s is still in Redis %v after %s (PTTL %v), want it given back",
				name, time.Since(since).Round(time.Millisecond), what, pttl)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval
	}
}
