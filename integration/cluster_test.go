package integration

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// clusterKind is one lock kind as the cluster tests use it: a holder side and a waiter side, which
// exclude each other, and the channel on which the waiter is woken.
type clusterKind struct {
	name string
	// holder and waiter return the two handles on the lock name, each in its own coordinator.
	holder, waiter func(c *coordinator.Coordinator, name string) *coordinator.Mutex
	// channel is the shard channel the waiter w of lock name listens on.
	channel func(name string, w *coordinator.Mutex) string
}

var clusterKinds = []clusterKind{
	{
		name:    "mutex",
		holder:  func(c *coordinator.Coordinator, n string) *coordinator.Mutex { return c.Mutex(n) },
		waiter:  func(c *coordinator.Coordinator, n string) *coordinator.Mutex { return c.Mutex(n) },
		channel: func(n string, _ *coordinator.Mutex) string { return redisops.ChannelName(n) },
	},
	{
		name:    "fair",
		holder:  func(c *coordinator.Coordinator, n string) *coordinator.Mutex { return c.FairMutex(n) },
		waiter:  func(c *coordinator.Coordinator, n string) *coordinator.Mutex { return c.FairMutex(n) },
		channel: func(n string, w *coordinator.Mutex) string { return redisops.FairChannelName(n, w.Owner()) },
	},
	{
		name:    "rw write then read",
		holder:  func(c *coordinator.Coordinator, n string) *coordinator.Mutex { return c.RWMutex(n).Write() },
		waiter:  func(c *coordinator.Coordinator, n string) *coordinator.Mutex { return c.RWMutex(n).Read() },
		channel: func(n string, _ *coordinator.Mutex) string { return redisops.RWChannelName(n) },
	},
	{
		name:    "rw read then write",
		holder:  func(c *coordinator.Coordinator, n string) *coordinator.Mutex { return c.RWMutex(n).Read() },
		waiter:  func(c *coordinator.Coordinator, n string) *coordinator.Mutex { return c.RWMutex(n).Write() },
		channel: func(n string, _ *coordinator.Mutex) string { return redisops.RWChannelName(n) },
	},
}

// clusterNames returns one lock name per node of cl, each starting with prefix, with names[i] served
// by cl.Nodes()[i].
func clusterNames(t *testing.T, cl *redistest.Cluster, prefix string) []string {
	t.Helper()
	nodes := cl.Nodes()
	names := make([]string, len(nodes))
	found := 0
	for i := 0; found < len(nodes) && i < 1000; i++ {
		name := fmt.Sprintf("%s:n%d", prefix, i)
		node := cl.NodeForKey(t, redisops.LockKey(name))
		j := slices.Index(nodes, node)
		if names[j] == "" {
			names[j] = name
			found++
		}
	}
	if found != len(nodes) {
		t.Fatalf("names with prefix %q reach %d of %d nodes", prefix, found, len(nodes))
	}
	return names
}

// clusterWaitSubscribed polls PUBSUB SHARDNUMSUB until channel has a subscriber.
func clusterWaitSubscribed(t *testing.T, cc *redis.ClusterClient, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := cc.PubSubShardNumSub(t.Context(), channel).Result()
		if err != nil {
			t.Fatalf("PUBSUB SHARDNUMSUB %s: %v", channel, err)
		}
		if n[channel] > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody subscribed to the shard channel %s within 5s", channel)
		}
		<-tick.C
	}
}

// clusterScanKeys returns the keys that match pattern, which must all be on node: it fails the test if
// another node has one.
func clusterScanKeys(t *testing.T, cl *redistest.Cluster, node *redistest.Server, pattern string) []string {
	t.Helper()
	var found []string
	for _, n := range cl.Nodes() {
		iter := n.Client(t).Scan(t.Context(), 0, pattern, 1000).Iterator()
		for iter.Next(t.Context()) {
			if n != node {
				t.Errorf("key %q is on %s, want %s", iter.Val(), n.Addr(), node.Addr())
			}
			found = append(found, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("SCAN on %s: %v", n.Addr(), err)
		}
	}
	return found
}

// clusterEventually polls cond until it reports true, and fails the test after 5 s.
func clusterEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 5s", what)
		}
		<-tick.C
	}
}

// TestCluster runs the lock kinds on a 3-master Redis Cluster, on names served by each master.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	c1 := newCoordinator(t, cc)
	c2 := newCoordinator(t, cl.Client(t))
	// The names of one subtest are on all 3 masters, so every subtest uses every master.

	t.Run("keys of a lock share its slot", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		plains := clusterNames(t, cl, t.Name()+":plain")
		fairs := clusterNames(t, cl, t.Name()+":fair")
		rws := clusterNames(t, cl, t.Name()+":rw")
		for i, node := range cl.Nodes() {
			plain, fair, rw := plains[i], fairs[i], rws[i]
			// Every kind of state a lock leaves: the hash, the token, a fair queue and its
			// timeouts, read timeout keys, a write intent and release latches.
			m := c1.Mutex(plain)
			mustLock(t, m)
			mustUnlock(t, m)
			seen := map[string][]string{plain: clusterScanKeys(t, cl, node, "*{"+plain+"}*")}

			fh, fw := c1.FairMutex(fair), c2.FairMutex(fair)
			mustLock(t, fh)
			fwait := lockAsync(ctx, fw)
			clusterWaitSubscribed(t, cc, redisops.FairChannelName(fair, fw.Owner()))
			fairQueued := clusterScanKeys(t, cl, node, "*{"+fair+"}*")

			reader, writer := c1.RWMutex(rw), c2.RWMutex(rw)
			if err := reader.RLock(ctx); err != nil {
				t.Fatalf("RLock: %v", err)
			}
			wwait := lockAsync(ctx, writer.Write())
			clusterEventually(t, "a write intent", func() bool {
				n, err := cc.Exists(ctx, redisops.WriteIntentKey(rw)).Result()
				return err == nil && n == 1
			})
			rwWaiting := clusterScanKeys(t, cl, node, "*{"+rw+"}*")

			mustUnlock(t, fh)
			if err := semRecv(t, fwait, 5*time.Second, "fair waiter"); err != nil {
				t.Fatalf("fair waiter: %v", err)
			}
			mustUnlock(t, fw)
			if err := reader.RUnlock(ctx); err != nil {
				t.Fatalf("RUnlock: %v", err)
			}
			if err := semRecv(t, wwait, 5*time.Second, "writer"); err != nil {
				t.Fatalf("writer: %v", err)
			}
			if err := writer.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			seen[fair] = append(fairQueued, clusterScanKeys(t, cl, node, "*{"+fair+"}*")...)
			seen[rw] = append(rwWaiting, clusterScanKeys(t, cl, node, "*{"+rw+"}*")...)

			want := map[string][]string{
				// A Mutex's release without handoff keeps no latch (its keys are the lock's, the
				// channel and the counter, which the script would refuse with CROSSSLOT otherwise).
				plain: {redisops.TokenKey(plain)},
				fair: {redisops.TokenKey(fair), redisops.FairQueueKey(fair), redisops.FairTimeoutKey(fair),
					"redisson_unlock_latch:{" + fair + "}:"},
				rw: {redisops.TokenKey(rw), redisops.ReadTimeoutKey(rw, reader.Owner(), 1),
					redisops.WriteIntentKey(rw), "redisson_unlock_latch:{" + rw + "}:"},
			}
			for lock, keys := range seen {
				slot := cl.KeySlot(t, redisops.LockKey(lock))
				if got := cl.NodeForSlot(slot); got != node {
					t.Fatalf("lock %q is on %s, want %s", lock, got.Addr(), node.Addr())
				}
				for _, k := range keys {
					if got := cl.KeySlot(t, k); got != slot {
						t.Errorf("key %q in slot %d, its lock %q in %d", k, got, lock, slot)
					}
				}
				for _, w := range want[lock] {
					if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, w) }) {
						t.Errorf("lock %q: no key %q on its node; seen %v", lock, w, keys)
					}
				}
			}
		}
	})

	for _, kind := range clusterKinds {
		t.Run("waiter woken by the notice/"+kind.name, func(t *testing.T) {
			t.Parallel()
			for _, name := range clusterNames(t, cl, t.Name()) {
				holder, waiter := kind.holder(c1, name), kind.waiter(c2, name)
				mustLock(t, holder) // a watchdog lease: 30 s
				errc := lockAsync(t.Context(), waiter)
				clusterWaitSubscribed(t, cc, kind.channel(name, waiter))
				start := time.Now()
				mustUnlock(t, holder)
				if err := semRecv(t, errc, 5*time.Second, "waiter Lock"); err != nil {
					t.Fatalf("waiter Lock on %s: %v", name, err)
				}
				if got := time.Since(start); got > time.Second {
					t.Errorf("%s: the waiter got the lock %v after the unlock, want within 1s", name, got)
				}
				if !semIsHeld(t, waiter) {
					t.Errorf("%s: the waiter does not hold the lock after Lock returned", name)
				}
				mustUnlock(t, waiter)
			}
		})
	}

	for _, kind := range clusterKinds[:3] {
		t.Run("counter stays exact/"+kind.name, func(t *testing.T) {
			t.Parallel()
			const goroutines, rounds = 3, 15
			for _, name := range clusterNames(t, cl, t.Name()) {
				counter := "{" + name + "}:counter"
				var wg sync.WaitGroup
				errs := make(chan error, 2*goroutines)
				for _, c := range []*coordinator.Coordinator{c1, c2} {
					for range goroutines {
						wg.Add(1)
						go func() {
							defer wg.Done()
							m := kind.holder(c, name) // for read-write: the write side
							for range rounds {
								if err := clusterIncrement(t, cc, m, counter); err != nil {
									errs <- err
									return
								}
							}
						}()
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				got, err := cc.Get(t.Context(), counter).Int()
				if err != nil {
					t.Fatalf("GET %s: %v", counter, err)
				}
				if want := 2 * goroutines * rounds; got != want {
					t.Fatalf("%s: counter %d, want %d", name, got, want)
				}
			}
		})
	}
}

// clusterIncrement adds one to counter with a read and a write that only the lock m keeps apart.
func clusterIncrement(t *testing.T, cc *redis.ClusterClient, m *coordinator.Mutex, counter string) error {
	ctx := t.Context()
	if err := m.Lock(ctx); err != nil {
		return fmt.Errorf("Lock %s: %w", m.Name(), err)
	}
	v, err := cc.Get(ctx, counter).Result()
	if err != nil && err != redis.Nil {
		return fmt.Errorf("GET %s: %w", counter, err)
	}
	n, _ := strconv.Atoi(v)
	if err := cc.Set(ctx, counter, n+1, 0).Err(); err != nil {
		return fmt.Errorf("SET %s: %w", counter, err)
	}
	if err := m.Unlock(ctx); err != nil {
		return fmt.Errorf("Unlock %s: %w", m.Name(), err)
	}
	return nil
}
