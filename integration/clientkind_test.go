package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// TestRingClientRefused: a go-redis Ring spreads keys over independent servers and moves a server's
// keys to the others while it fails its health checks, so a lock held there could be taken again by a
// second owner; its pub/sub also cannot subscribe without a channel. New refuses it with
// ErrUnsupportedClient, rather than returning a coordinator whose pub/sub bridge fails and whose
// waiters wake only when the holder's lease runs out.
func TestRingClientRefused(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	if err := ring.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("Ring PING: %v", err)
	}
	c, err := coordinator.New(ring)
	if err == nil {
		_ = c.Close()
	}
	if !errors.Is(err, coordinator.ErrUnsupportedClient) || c != nil {
		t.Fatalf("New(*redis.Ring) = %v, %v; want nil, ErrUnsupportedClient", c, err)
	}
}

// TestUniversalClientKinds: the client redis.NewUniversalClient returns for one address is accepted, and
// its waiters are woken by the unlock notice. (Sentinel and Cluster clients have tests of their own.)
func TestUniversalClientKinds(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { _ = client.Close() })
	c := newCoordinator(t, client)
	holder, waiter := c.Mutex(t.Name()), c.Mutex(t.Name())
	mustLock(t, holder)
	errc := lockAsync(t.Context(), waiter)
	mustUnlock(t, holder)
	if err := semRecv(t, errc, 2*time.Second, "the waiter's Lock after the unlock"); err != nil {
		t.Fatalf("waiter Lock: %v", err)
	}
	mustUnlock(t, waiter)
}
