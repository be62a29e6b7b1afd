package integration

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
)

// waitInstant waits until the instant at.
func waitInstant(at time.Time) {
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	<-timer.C
}

// waitKeyDeleted waits, for at most within, until Redis no longer has the key.
func waitKeyDeleted(t *testing.T, exists func() bool, within time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for exists() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the key still exists after %v", what, within)
		}
		<-tick.C
	}
}

// TestReadInnerReleaseKeepsTheOlderHoldsValidity: a read release renews none of the owner's remaining
// read holds (each has its own timeout key), so after an inner RUnlock the hold is valid only as long
// as the older hold's key: its Done closes before Redis drops the lock and another owner can write.
func TestReadInnerReleaseKeepsTheOlderHoldsValidity(t *testing.T) {
	t.Parallel()
	srv, client, c := setup(t)
	_, other := semOther(t, srv)
	name := t.Name()
	rw := c.RWMutex(name, coordinator.WithLease(2*time.Second))
	start := time.Now()
	if err := rw.RLock(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitInstant(start.Add(time.Second))
	if err := rw.RLock(t.Context()); err != nil { // the second hold's key lasts 2 s from now
		t.Fatal(err)
	}
	waitInstant(start.Add(1200 * time.Millisecond))
	if err := rw.RUnlock(t.Context()); err != nil { // drops the second hold: the first's key is left
		t.Fatal(err)
	}
	done := rw.Read().Done()
	writerAfterReader(t, client, other, name, done, "the lock expired")
}

// TestRExtendThenInnerRelease: the same after RExtend gave both read holds a shorter lease.
func TestRExtendThenInnerRelease(t *testing.T) {
	t.Parallel()
	srv, client, c := setup(t)
	_, other := semOther(t, srv)
	name := t.Name()
	rw := c.RWMutex(name, coordinator.WithLease(10*time.Second))
	for range 2 {
		if err := rw.RLock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	extended := time.Now()
	if err := rw.RExtend(t.Context(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	waitInstant(extended.Add(time.Second))
	if err := rw.RUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	done := rw.Read().Done()
	waitInstant(extended.Add(2100 * time.Millisecond)) // the first hold's key has run out in Redis
	reader := other.RWMutex(name, coordinator.WithLease(30*time.Second))
	if err := reader.RLock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := reader.RUnlock(t.Context()); err != nil { // its walk finds no live key: the lock is freed
		t.Fatal(err)
	}
	writerAfterReader(t, client, other, name, done, "the lock was freed")
}

// writerAfterReader waits until Redis has dropped the lock name (why says how), takes its write lock
// from other, and fails unless the reader's Done, done, closed before that.
func writerAfterReader(t *testing.T, client *redis.Client, other *coordinator.Coordinator, name string, done <-chan struct{}, why string) {
	t.Helper()
	waitKeyDeleted(t, func() bool { return client.Exists(t.Context(), name).Val() == 1 }, 5*time.Second, "the lock")
	if ok, err := other.RWMutex(name).TryLock(t.Context()); !ok || err != nil {
		t.Fatalf("writer TryLock after %s = %v, %v", why, ok, err)
	}
	select {
	case <-done:
	default:
		t.Fatal("another owner holds the write lock while the reader's Done is still open")
	}
}
