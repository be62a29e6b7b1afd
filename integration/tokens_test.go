package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/redisops"
)

// TestTokensLeaveNoKeys: with default options, 1,000 names of every kind locked and released leave no
// key at all in Redis once the unlock latches and the token counters have expired (10s). The token
// counter redisson_lock_token:{name} used to stay forever, one key per name. Tokens still strictly
// increase per name across acquisitions, before and after the counter expired.
func TestTokensLeaveNoKeys(t *testing.T) {
	_, client, c := setup(t)
	ctx := t.Context()
	const names = 1000
	first := make([]int64, names)
	var wg sync.WaitGroup
	errc := make(chan error, names)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < names; i += 8 {
				name := fmt.Sprintf("%s:%d", t.Name(), i)
				var m *coordinator.Mutex
				switch i % 3 {
				case 0:
					m = c.Mutex(name)
				case 1:
					m = c.FairMutex(name)
				default:
					m = c.RWMutex(name).Write()
				}
				if err := m.Lock(ctx); err != nil {
					errc <- fmt.Errorf("Lock(%s): %w", name, err)
					return
				}
				first[i] = m.Token()
				if err := m.Unlock(ctx); err != nil {
					errc <- fmt.Errorf("Unlock(%s): %w", name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if n := len(dataKeys(t, client)); n == 0 {
		t.Fatal("no key right after the unlocks; the latches and counters should still be there")
	}
	start := time.Now()
	deadline := start.Add(redisops.DefaultLatchExpiry + redisops.DefaultTokenExpiry + 10*time.Second)
	for {
		keys := dataKeys(t, client)
		if len(keys) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left %v after the unlocks, e.g. %q", len(keys), time.Since(start).Round(time.Second), keys[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d names left no key %v after their unlocks", names, time.Since(start).Round(100*time.Millisecond))
	// After the counters expired, tokens of the same names are still higher.
	for i := range 30 {
		name := fmt.Sprintf("%s:%d", t.Name(), i)
		m := c.Mutex(name)
		if i%3 == 1 {
			m = c.FairMutex(name)
		} else if i%3 == 2 {
			m = c.RWMutex(name).Write()
		}
		mustLock(t, m)
		if m.Token() <= first[i] {
			t.Errorf("%s: token after the counter expired %d, want above %d", name, m.Token(), first[i])
		}
		mustUnlock(t, m)
	}
}

// TestTokensPersistent: WithPersistentFencingTokens keeps Redisson's RFencedLock counter: tokens 1, 2,
// 3, ... in acquisition order, across owners and lock kinds of one name, and the counter stays.
func TestTokensPersistent(t *testing.T) {
	_, client, c := setup(t, coordinator.WithPersistentFencingTokens())
	ctx := t.Context()
	name := t.Name()
	a, b := c.Mutex(name), c.RWMutex(name).Write()
	check := func(m *coordinator.Mutex, want int64) {
		t.Helper()
		mustLock(t, m)
		if got := m.Token(); got != want {
			t.Errorf("token %d, want %d", got, want)
		}
	}
	check(a, 1)
	check(a, 2) // a re-entry
	mustUnlock(t, a)
	mustUnlock(t, a)
	check(b, 3)
	mustUnlock(t, b)
	if v, err := client.Get(ctx, redisops.TokenKey(name)).Int64(); err != nil || v != 3 {
		t.Errorf("counter = %d, %v; want 3", v, err)
	}
	if ttl := client.PTTL(ctx, redisops.TokenKey(name)).Val(); ttl != -1 {
		t.Errorf("counter PTTL = %v, want none (kept forever)", ttl)
	}
}
