package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// groupNodes is a set of independent redis-servers, each with a client and a coordinator.
type groupNodes struct {
	srvs    []*redistest.Server
	clients []*redis.Client
	coords  []*coordinator.Coordinator
}

// groupStart starts n independent redis-servers, each with a client (context deadlines honoured, no
// retries, short dial timeout, so a killed server fails fast) and a coordinator with opts.
func groupStart(t *testing.T, n int, opts ...coordinator.Option) *groupNodes {
	t.Helper()
	g := &groupNodes{}
	for range n {
		srv := redistest.Start(t)
		client := redis.NewClient(&redis.Options{
			Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		})
		t.Cleanup(func() { _ = client.Close() })
		g.srvs = append(g.srvs, srv)
		g.clients = append(g.clients, client)
		g.coords = append(g.coords, newCoordinator(t, client, opts...))
	}
	return g
}

// handles returns one new Mutex handle per node on name i of names (names[i] on node i when there are
// as many names as nodes, else names[0] everywhere).
func (g *groupNodes) handles(names ...string) []*coordinator.Mutex {
	ms := make([]*coordinator.Mutex, len(g.coords))
	for i, c := range g.coords {
		name := names[0]
		if len(names) == len(g.coords) {
			name = names[i]
		}
		ms[i] = c.Mutex(name)
	}
	return ms
}

// heldBy returns the owners recorded in the lock hash name on node i.
func (g *groupNodes) heldBy(t *testing.T, i int, name string) map[string]string {
	t.Helper()
	fields, err := g.clients[i].HGetAll(t.Context(), name).Result()
	if err != nil {
		t.Fatalf("HGETALL %s on node %d: %v", name, i, err)
	}
	return fields
}

func groupNames(t *testing.T, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s:m%d", t.Name(), i)
	}
	return names
}

func mustGroupLock(t *testing.T, g *coordinator.Group) {
	t.Helper()
	if err := g.Lock(t.Context()); err != nil {
		t.Fatalf("group Lock: %v", err)
	}
}

func mustGroupUnlock(t *testing.T, g *coordinator.Group) {
	t.Helper()
	if err := g.Unlock(t.Context()); err != nil {
		t.Fatalf("group Unlock: %v", err)
	}
}

// TestMultiLockFailsWhileAMemberIsHeld: a MultiLock over 3 servers is not obtained while one member is
// held by another owner, leaves nothing of its attempts behind, and gets through once that member is
// released.
func TestMultiLockFailsWhileAMemberIsHeld(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3)
	names := groupNames(t, 3)
	members := nodes.handles(names...)
	group := nodes.coords[0].MultiLock(members)

	other := nodes.coords[1].Mutex(names[1])
	mustLock(t, other)

	if ok, err := group.TryLock(t.Context()); ok || err != nil {
		t.Fatalf("TryLock with member 1 held elsewhere = %v, %v; want false, nil", ok, err)
	}
	start := time.Now()
	if ok, err := group.TryLock(t.Context(), coordinator.Wait(300*time.Millisecond)); ok || err != nil {
		t.Fatalf("TryLock(Wait 300ms) with member 1 held elsewhere = %v, %v; want false, nil", ok, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("TryLock(Wait 300ms) took %v", d)
	}
	// What the attempts took on the free members was released.
	for _, i := range []int{0, 2} {
		groupEventually(t, 2*time.Second, fmt.Sprintf("member %d released after the failed attempts", i), func() bool {
			return len(nodes.heldBy(t, i, names[i])) == 0
		})
	}
	if fields := nodes.heldBy(t, 1, names[1]); len(fields) != 1 || fields[other.Owner()] != "1" {
		t.Fatalf("member 1 hash = %v, want only the other owner", fields)
	}
	select {
	case <-group.Done():
	default:
		t.Fatal("Done of a group that holds nothing is not closed")
	}
	if err := group.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Unlock of a group that holds nothing = %v, want ErrNotHeld", err)
	}

	// The waiting Lock gets through when the other owner lets go.
	errc := make(chan error, 1)
	go func() { errc <- group.Lock(t.Context()) }()
	mustUnlock(t, other)
	if err := semRecv(t, errc, 5*time.Second, "group Lock after the member was released"); err != nil {
		t.Fatalf("group Lock: %v", err)
	}
	for i, m := range members {
		if !semIsHeld(t, m) {
			t.Errorf("member %d not held by the group", i)
		}
	}
	if tokens := group.Tokens(); len(tokens) != 3 || tokens[0] <= 0 || tokens[1] <= 0 || tokens[2] <= 0 {
		t.Errorf("Tokens = %v, want 3 positive tokens", tokens)
	}
	mustGroupUnlock(t, group)
	for i := range members {
		if fields := nodes.heldBy(t, i, names[i]); len(fields) != 0 {
			t.Errorf("member %d after Unlock: %v, want free", i, fields)
		}
	}
}

// groupEventually polls cond every 10 ms until it holds or within passes.
func groupEventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		<-tick.C
	}
}

// groupCounter runs workers goroutines, each with its own group from newGroup, for rounds rounds of
// Lock, a non-atomic increment of a counter on rdb, Unlock; and checks the counter and that no two
// critical sections overlapped.
func groupCounter(t *testing.T, rdb redis.Cmdable, workers, rounds int, newGroup func(w int) *coordinator.Group) {
	t.Helper()
	key := t.Name() + ":counter"
	var g concGauge
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		group := newGroup(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := group.Lock(t.Context()); err != nil {
					errs <- fmt.Errorf("worker %d Lock: %w", w, err)
					return
				}
				_, err := concBump(t.Context(), rdb, key, &g)
				if uerr := group.Unlock(t.Context()); err == nil {
					err = uerr
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	g.check(t)
	concCheckCounter(t, rdb, key, workers*rounds)
}

// TestMultiLockCounter: 10 goroutines x 5 rounds, each goroutine with its own MultiLock over the same 3
// names on 3 servers, keep a counter exact.
func TestMultiLockCounter(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3)
	names := groupNames(t, 3)
	groupCounter(t, nodes.clients[0], 10, 5, func(w int) *coordinator.Group {
		return nodes.coords[w%3].MultiLock(nodes.handles(names...))
	})
}

// TestMultiLockOppositeOrders: two groups over the same 3 names, listed in opposite orders, both
// complete their rounds: the jittered backoff keeps them from livelocking.
func TestMultiLockOppositeOrders(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3)
	names := groupNames(t, 3)
	groupCounter(t, nodes.clients[0], 2, 20, func(w int) *coordinator.Group {
		ms := nodes.handles(names...)
		if w == 1 {
			ms[0], ms[2] = ms[2], ms[0]
		}
		return nodes.coords[w].MultiLock(ms)
	})
}

// TestMultiLockLeaseAndWatchdog: with a lease every member expires with it and the group's Done closes
// by then; without one the members' watchdogs keep the group past several timeouts, and losing one
// member loses the group and releases the others.
func TestMultiLockLeaseAndWatchdog(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	nodes := groupStart(t, 3, coordinator.WithWatchdogTimeout(timeout))
	names := groupNames(t, 3)

	t.Run("lease", func(t *testing.T) {
		group := nodes.coords[0].MultiLock(nodes.handles(names...))
		const lease = 400 * time.Millisecond
		start := time.Now()
		if ok, err := group.TryLock(t.Context(), coordinator.Lease(lease)); !ok || err != nil {
			t.Fatalf("TryLock(Lease) = %v, %v", ok, err)
		}
		obtained := time.Now()
		for i := range names {
			if ttl, err := nodes.clients[i].PTTL(t.Context(), names[i]).Result(); err != nil || ttl <= 0 || ttl > lease {
				t.Errorf("member %d PTTL = %v, %v; want in (0, %v]", i, ttl, err, lease)
			}
		}
		// The lease minus the drift allowance (1% of it plus 2 ms) after the acquisition started.
		validity := lease - lease/100 - 2*time.Millisecond
		if until := group.ValidUntil(); until.Before(start.Add(validity)) || until.After(obtained.Add(validity)) {
			t.Errorf("ValidUntil = %v, want the lease minus the drift after the acquisition started (between %v and %v)",
				until, start.Add(validity), obtained.Add(validity))
		}
		semClosedBy(t, group.Done(), start.Add(lease+500*time.Millisecond), "group Done at the end of its lease")
		for i := range names {
			groupEventually(t, time.Second, fmt.Sprintf("member %d expired", i), func() bool {
				return len(nodes.heldBy(t, i, names[i])) == 0
			})
		}
		if err := group.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
			t.Errorf("Unlock after the lease ran out = %v, want ErrNotHeld", err)
		}
	})

	t.Run("watchdog", func(t *testing.T) {
		members := nodes.handles(names...)
		group := nodes.coords[1].MultiLock(members)
		mustGroupLock(t, group)
		done := group.Done()
		// Three watchdog timeouts later every member is still held, renewed by its coordinator.
		hold := time.NewTimer(3 * timeout)
		select {
		case <-done:
			t.Fatal("group lost while the watchdogs renew its members")
		case <-hold.C:
		}
		for i, m := range members {
			if !semIsHeld(t, m) {
				t.Fatalf("member %d not held after 3 watchdog timeouts", i)
			}
		}
		// Member 2 is force-unlocked from outside: the group is lost and the others are released.
		if ok, err := nodes.coords[2].Mutex(names[2]).ForceUnlock(t.Context()); !ok || err != nil {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		semClosedBy(t, done, time.Now().Add(2*timeout), "group Done after a member was force-unlocked")
		for i := range 2 {
			groupEventually(t, 2*time.Second, fmt.Sprintf("member %d released after the group was lost", i), func() bool {
				return len(nodes.heldBy(t, i, names[i])) == 0
			})
		}
		if err := group.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
			t.Errorf("Unlock of a lost group = %v, want ErrNotHeld", err)
		}
	})
}

// TestRedLockSurvivesMinorityFailure: a RedLock over 5 servers is obtained with 2 of them killed, and not
// with 3 killed, in which case TryLock returns false within its wait.
func TestRedLockSurvivesMinorityFailure(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 5)
	name := t.Name()
	group := nodes.coords[0].RedLock(nodes.handles(name))

	nodes.srvs[3].Kill()
	nodes.srvs[4].Kill()
	if ok, err := group.TryLock(t.Context(), coordinator.Wait(2*time.Second)); !ok || err != nil {
		t.Fatalf("TryLock with 2 of 5 killed = %v, %v; want true", ok, err)
	}
	for i := range 3 {
		if fields := nodes.heldBy(t, i, name); len(fields) != 1 {
			t.Errorf("node %d hash = %v, want the group's hold", i, fields)
		}
	}
	if tok := group.Token(); tok <= 0 {
		t.Errorf("Token = %d, want positive", tok)
	}
	mustGroupUnlock(t, group)

	nodes.srvs[2].Kill()
	const wait = 500 * time.Millisecond
	start := time.Now()
	// Killed nodes are failures, not other owners' holds: TryLock says which nodes failed.
	ok, err := group.TryLock(t.Context(), coordinator.Wait(wait))
	var why *coordinator.GroupError
	if ok || !errors.As(err, &why) || !errors.Is(err, coordinator.ErrNotObtained) {
		t.Fatalf("TryLock with 3 of 5 killed = %v, %v; want false and a *GroupError", ok, err)
	}
	if why.Quorum != 3 || why.Taken != 2 || len(why.Members) != 3 || why.Members[0].Index != 2 || why.Members[2].Index != 4 {
		t.Errorf("GroupError = %+v, want nodes 2, 3 and 4 failed, 2 of 3 needed taken", why)
	}
	for _, m := range why.Members {
		if errors.Is(m.Err, coordinator.ErrHeldByOther) {
			t.Errorf("killed node %d reported as held by another owner: %v", m.Index, m.Err)
		}
	}
	if d := time.Since(start); d > wait+time.Second {
		t.Errorf("TryLock(Wait %v) with 3 of 5 killed took %v", wait, d)
	}
	for i := range 2 {
		groupEventually(t, 2*time.Second, fmt.Sprintf("node %d released after the failed attempts", i), func() bool {
			return len(nodes.heldBy(t, i, name)) == 0
		})
	}
}

// TestRedLockQuorum: over 3 servers, a RedLock is obtained while 1 node is held by another owner, and
// not while 2 are.
func TestRedLockQuorum(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3)
	name := t.Name()
	group := nodes.coords[0].RedLock(nodes.handles(name))

	other0 := nodes.coords[0].Mutex(name)
	mustLock(t, other0)
	if ok, err := group.TryLock(t.Context()); !ok || err != nil {
		t.Fatalf("TryLock with 1 of 3 held elsewhere = %v, %v; want true", ok, err)
	}
	if tokens := group.Tokens(); tokens[0] != 0 || tokens[1] <= 0 || tokens[2] <= 0 {
		t.Errorf("Tokens = %v, want 0 for the node held elsewhere and positive for the others", tokens)
	}
	mustGroupUnlock(t, group)
	if fields := nodes.heldBy(t, 0, name); len(fields) != 1 || fields[other0.Owner()] != "1" {
		t.Errorf("node 0 after the group's Unlock = %v, want the other owner's hold untouched", fields)
	}

	other1 := nodes.coords[1].Mutex(name)
	mustLock(t, other1)
	if ok, err := group.TryLock(t.Context(), coordinator.Wait(300*time.Millisecond)); ok || err != nil {
		t.Fatalf("TryLock with 2 of 3 held elsewhere = %v, %v; want false, nil", ok, err)
	}
	groupEventually(t, 2*time.Second, "node 2 released after the failed attempts", func() bool {
		return len(nodes.heldBy(t, 2, name)) == 0
	})
	for i, o := range []*coordinator.Mutex{other0, other1} {
		if fields := nodes.heldBy(t, i, name); len(fields) != 1 || fields[o.Owner()] != "1" {
			t.Errorf("node %d = %v, want only the other owner's hold", i, fields)
		}
	}
}

// TestRedLockPausedNode: a node stopped with SIGSTOP during the acquisition does not stall it past its
// per-node timeout; the lock is obtained on the other 4, and once the node resumes nothing of the
// group's attempt stays on it.
func TestRedLockPausedNode(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 5)
	name := t.Name()
	const nodeTimeout = 100 * time.Millisecond
	group := nodes.coords[0].RedLock(nodes.handles(name), coordinator.WithNodeTimeout(nodeTimeout))

	nodes.srvs[2].Pause()
	start := time.Now()
	ok, err := group.TryLock(t.Context())
	elapsed := time.Since(start)
	if !ok || err != nil {
		t.Fatalf("TryLock with node 2 paused = %v, %v; want true", ok, err)
	}
	if elapsed > nodeTimeout+400*time.Millisecond {
		t.Errorf("TryLock with node 2 paused took %v, want about the node timeout %v", elapsed, nodeTimeout)
	}
	t.Logf("TryLock with a paused node took %v", elapsed)
	if tokens := group.Tokens(); tokens[2] != 0 {
		t.Errorf("Tokens = %v, want 0 for the paused node", tokens)
	}
	// Unlock does not wait for the paused node either.
	start = time.Now()
	mustGroupUnlock(t, group)
	if d := time.Since(start); d > time.Second {
		t.Errorf("Unlock with node 2 paused took %v, want it not to wait for the paused node", d)
	}
	nodes.srvs[2].Resume()
	groupEventually(t, 10*time.Second, "the paused node free after it resumed", func() bool {
		return len(nodes.heldBy(t, 2, name)) == 0
	})
}

// TestRedLockCounter: 8 goroutines x 5 rounds, each with its own RedLock over 5 servers, keep a counter
// exact.
func TestRedLockCounter(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 5)
	name := t.Name()
	groupCounter(t, nodes.clients[0], 8, 5, func(w int) *coordinator.Group {
		return nodes.coords[w%5].RedLock(nodes.handles(name))
	})
}

// TestRedLockTokensIncrease: the group token of successive RedLock holders strictly increases even when
// their majorities differ and the nodes' counters disagree: a holder raises the counters of the nodes it
// took to the highest token it got.
func TestRedLockTokensIncrease(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3)
	name := t.Name()
	// Node 0's counter is far ahead of the others (a RedLock floor from a node whose clock is ahead
	// raised it): it is kept, as raise_token.lua keeps it, until node 0's clock has passed it by the
	// token expiry.
	ahead := time.Now().Add(time.Hour).UnixMicro()
	if err := nodes.clients[0].Set(t.Context(), redisops.TokenKey(name), ahead, time.Hour+time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	a := nodes.coords[0].RedLock(nodes.handles(name))
	mustGroupLock(t, a)
	first := a.Token()
	if first != ahead+1 {
		t.Fatalf("first holder's Token = %d, want %d (node 0's counter plus one)", first, ahead+1)
	}
	for i := range 3 {
		if v, err := nodes.clients[i].Get(t.Context(), redisops.TokenKey(name)).Int64(); err != nil || v < first {
			t.Errorf("node %d counter = %d, %v; want raised to at least %d", i, v, err, first)
		}
		// A raised counter lives until its server's clock has passed it (an hour here).
		if ttl := nodes.clients[i].PTTL(t.Context(), redisops.TokenKey(name)).Val(); ttl < 50*time.Minute {
			t.Errorf("node %d counter PTTL = %v, want about an hour", i, ttl)
		}
	}
	mustGroupUnlock(t, a)

	// The next holder cannot reach node 0: its majority is nodes 1 and 2.
	nodes.srvs[0].Kill()
	b := nodes.coords[1].RedLock(nodes.handles(name))
	if ok, err := b.TryLock(t.Context(), coordinator.Wait(2*time.Second)); !ok || err != nil {
		t.Fatalf("TryLock with node 0 down = %v, %v", ok, err)
	}
	if second := b.Token(); second <= first {
		t.Errorf("second holder's Token = %d, want more than the first holder's %d", second, first)
	}
	mustGroupUnlock(t, b)
}

// TestGroupBadInput: invalid groups and calls get sentinel errors, never a panic.
func TestGroupBadInput(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 1)
	c := nodes.coords[0]
	m := c.Mutex(t.Name())
	for _, tc := range []struct {
		name  string
		group *coordinator.Group
		want  error
	}{
		{"no members", c.MultiLock(nil), coordinator.ErrInvalidGroup},
		{"nil member", c.RedLock([]*coordinator.Mutex{m, nil}), coordinator.ErrInvalidGroup},
		{"member twice", c.MultiLock([]*coordinator.Mutex{m, m}), coordinator.ErrInvalidGroup},
		{"invalid member", c.MultiLock([]*coordinator.Mutex{c.Mutex("")}), coordinator.ErrEmptyName},
		{"invalid node timeout", c.RedLock([]*coordinator.Mutex{m}, coordinator.WithNodeTimeout(-time.Second)), coordinator.ErrInvalidOption},
		{"huge node timeout", c.RedLock([]*coordinator.Mutex{m}, coordinator.WithNodeTimeout(math.MaxInt64)), coordinator.ErrInvalidOption},
		{"invalid max lease", c.RedLock([]*coordinator.Mutex{m}, coordinator.WithMaxLease(0)), coordinator.ErrInvalidOption},
		{"huge max lease", c.RedLock([]*coordinator.Mutex{m}, coordinator.WithMaxLease(math.MaxInt64)), coordinator.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.group.Lock(t.Context()); !errors.Is(err, tc.want) {
				t.Errorf("Lock = %v, want %v", err, tc.want)
			}
			if ok, err := tc.group.TryLock(t.Context()); ok || !errors.Is(err, tc.want) {
				t.Errorf("TryLock = %v, %v, want %v", ok, err, tc.want)
			}
			if err := tc.group.Unlock(t.Context()); !errors.Is(err, tc.want) {
				t.Errorf("Unlock = %v, want %v", err, tc.want)
			}
		})
	}
	group := c.MultiLock([]*coordinator.Mutex{m})
	if _, err := group.TryLock(t.Context(), coordinator.Wait(-time.Second)); !errors.Is(err, coordinator.ErrInvalidWait) {
		t.Errorf("TryLock(Wait(-1s)) = %v, want ErrInvalidWait", err)
	}
	if _, err := group.TryLock(t.Context(), coordinator.Lease(0)); !errors.Is(err, coordinator.ErrInvalidLease) {
		t.Errorf("TryLock(Lease(0)) = %v, want ErrInvalidLease", err)
	}
	if err := group.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Errorf("Unlock before Lock = %v, want ErrNotHeld", err)
	}
	// Re-entry counts locally; one Unlock per Lock.
	mustGroupLock(t, group)
	mustGroupLock(t, group)
	mustGroupUnlock(t, group)
	if !semIsHeld(t, m) {
		t.Error("member released after the first of two Unlocks")
	}
	mustGroupUnlock(t, group)
	if err := group.Unlock(t.Context()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Errorf("double Unlock = %v, want ErrNotHeld", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := group.Lock(ctx); !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Errorf("Lock with a cancelled ctx = %v, want ErrNotObtained and context.Canceled", err)
	}
	_ = c.Close()
	if err := group.Lock(t.Context()); !errors.Is(err, coordinator.ErrClosed) {
		t.Errorf("Lock after Close = %v, want ErrClosed", err)
	}
	if g := c.MultiLock([]*coordinator.Mutex{m}); !errors.Is(g.Lock(t.Context()), coordinator.ErrClosed) {
		t.Error("a group created after Close does not return ErrClosed")
	}
}

// TestGroupCloseReleasesMembers: closing the coordinator of a group that holds members on other
// coordinators releases them.
func TestGroupCloseReleasesMembers(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 2)
	names := groupNames(t, 2)
	client := nodes.srvs[0].Client(t)
	host := newCoordinator(t, client)
	group := host.MultiLock(nodes.handles(names...))
	mustGroupLock(t, group)
	done := group.Done()
	if err := host.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, done, time.Second, "group Done at Close")
	for i := range names {
		if fields := nodes.heldBy(t, i, names[i]); len(fields) != 0 {
			t.Errorf("member %d after the group's coordinator closed = %v, want free", i, fields)
		}
	}
}

// TestMultiLockMemberClosed: a member whose coordinator is closed makes the group's Lock fail with
// ErrClosed at once, instead of taking and releasing the other members in a loop until ctx ends.
func TestMultiLockMemberClosed(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 2)
	names := groupNames(t, 2)
	group := nodes.coords[0].MultiLock(nodes.handles(names...))
	sub := nodes.coords[0].Subscribe(coordinator.OfType(messages.EventAcquired), 1024)
	defer sub.Close()
	_ = nodes.coords[1].Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := group.Lock(ctx); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("Lock with a member on a closed coordinator = %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Lock took %v to fail, want at once", d)
	}
	if n := len(sub.Events()); n > 1 {
		t.Errorf("member 0 was acquired %d times, want at most once", n)
	}
	groupEventually(t, 2*time.Second, "member 0 free", func() bool { return len(nodes.heldBy(t, 0, names[0])) == 0 })
}

// TestMultiLockMemberKindMismatch: a member whose owner holds its name as another kind of lock fails
// the group at once with ErrKindMismatch, as a closed member does, instead of being retried until the
// caller gives up; the other member is left free.
func TestMultiLockMemberKindMismatch(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 2)
	names := groupNames(t, 2)
	owner := "job:" + t.Name()
	fair := nodes.coords[1].FairMutex(names[1], coordinator.WithOwner(owner))
	mustLock(t, fair)
	members := []*coordinator.Mutex{
		nodes.coords[0].Mutex(names[0]),
		nodes.coords[1].Mutex(names[1], coordinator.WithOwner(owner)),
	}
	group := nodes.coords[0].MultiLock(members)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := group.Lock(ctx)
	if !errors.Is(err, coordinator.ErrKindMismatch) || !errors.Is(err, coordinator.ErrNotObtained) {
		t.Fatalf("Lock with a member held as a fair lock by its owner = %v, want ErrKindMismatch and ErrNotObtained", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Lock took %v to fail, want at once, not at the caller's deadline", d)
	}
	groupEventually(t, 2*time.Second, "member 0 free", func() bool { return len(nodes.heldBy(t, 0, names[0])) == 0 })
	if held, err := fair.IsHeld(t.Context()); !held || err != nil {
		t.Errorf("the owner's fair hold: IsHeld = %v, %v; want true", held, err)
	}
}

// TestGroupCloseWhileAcquiring: closing the coordinator of a group while its member, on another
// coordinator, is being acquired neither stalls Close nor leaves the member held.
func TestGroupCloseWhileAcquiring(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 1)
	srv := nodes.srvs[0]
	for round := range 40 {
		name := fmt.Sprintf("%s:%d", t.Name(), round)
		host := newCoordinator(t, srv.Client(t))
		group := host.MultiLock([]*coordinator.Mutex{nodes.coords[0].Mutex(name)})
		errc := make(chan error, 1)
		go func() { errc <- group.Lock(t.Context()) }()
		start := time.Now()
		_ = host.Close()
		if d := time.Since(start); d > time.Second {
			t.Fatalf("round %d: Close took %v", round, d)
		}
		<-errc
		groupEventually(t, 2*time.Second, fmt.Sprintf("round %d: the member free after Close", round), func() bool {
			return len(nodes.heldBy(t, 0, name)) == 0
		})
	}
}

// groupStartDefault starts n independent redis-servers, each with a client on go-redis's default
// options (as an application would create it) and a coordinator with opts.
func groupStartDefault(t *testing.T, n int, opts ...coordinator.Option) *groupNodes {
	t.Helper()
	g := &groupNodes{}
	for range n {
		srv := redistest.Start(t)
		client := srv.Client(t)
		g.srvs = append(g.srvs, srv)
		g.clients = append(g.clients, client)
		g.coords = append(g.coords, newCoordinator(t, client, opts...))
	}
	return g
}

// TestMultiLockMemberDownFreesHealthyMembers: a MultiLock over 3 masters with one of them killed or
// paused returns not obtained within its wait plus the node timeout, and by the time it returns it
// holds nothing: a second coordinator takes the healthy members' names at once.
func TestMultiLockMemberDownFreesHealthyMembers(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"killed", "paused"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			nodes := groupStartDefault(t, 3)
			names := groupNames(t, 3)
			// Another process: its own coordinators on the same servers.
			others := make([]*coordinator.Coordinator, 2)
			for i := range others {
				others[i] = newCoordinator(t, nodes.srvs[i].Client(t))
			}
			if fault == "killed" {
				nodes.srvs[2].Kill()
			} else {
				nodes.srvs[2].Pause()
				t.Cleanup(nodes.srvs[2].Resume)
			}
			group := nodes.coords[0].MultiLock(nodes.handles(names...))
			const wait = 300 * time.Millisecond
			const nodeTimeout = 2 * time.Second // a MultiLock's default bound: 1s plus the 1s replica-sync timeout
			// TryLock without Wait: the member's attempt is bounded by the node timeout by default.
			for _, call := range []string{"TryLock", "TryLock(Wait)", "Lock(ctx)"} {
				start := time.Now()
				var ok bool
				var err error
				switch call {
				case "TryLock":
					ok, err = group.TryLock(t.Context())
				case "TryLock(Wait)":
					ok, err = group.TryLock(t.Context(), coordinator.Wait(wait))
				default:
					ctx, cancel := context.WithTimeout(t.Context(), wait)
					err = group.Lock(ctx)
					cancel()
				}
				took := time.Since(start)
				t.Logf("%s with member 2 %s: %v, %q after %v", call, fault, ok, err, took)
				var why *coordinator.GroupError
				if ok || !errors.As(err, &why) || !errors.Is(err, coordinator.ErrNotObtained) {
					t.Fatalf("%s with member 2 %s = %v, %v; want false and a *GroupError", call, fault, ok, err)
				}
				if len(why.Members) != 1 || why.Members[0].Index != 2 || !errors.Is(why.Members[0].Err, coordinator.ErrNoAnswer) &&
					fault == "paused" {
					t.Errorf("%s: GroupError members = %v, want member 2 unanswered", call, why.Members)
				}
				if took > wait+nodeTimeout+500*time.Millisecond {
					t.Errorf("%s took %v, want within its wait %v plus the node timeout %v", call, took, wait, nodeTimeout)
				}
				// Right after the call: the healthy members are free, in Redis and for another owner.
				for i := range 2 {
					groupEventually(t, 100*time.Millisecond, fmt.Sprintf("%s: member %d free in Redis", call, i), func() bool {
						return len(nodes.heldBy(t, i, names[i])) == 0
					})
					m := others[i].Mutex(names[i])
					if ok, err := m.TryLock(t.Context()); !ok || err != nil {
						t.Fatalf("%s: another coordinator's TryLock on member %d = %v, %v; want true", call, i, ok, err)
					}
					mustUnlock(t, m)
				}
			}
		})
	}
}

// TestGroupRefusalSaysWhy: a refused MultiLock or RedLock says which members were not taken and why.
// TryLock reports (false, nil) only when other owners hold them; Lock's error holds the reasons.
func TestGroupRefusalSaysWhy(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3)
	names := groupNames(t, 3)
	// Member 1 of the MultiLock, and nodes 0 and 1 of the RedLock, are held by other owners.
	mustLock(t, nodes.coords[1].Mutex(names[1]))
	redName := t.Name() + ":red"
	for i := range 2 {
		mustLock(t, nodes.coords[i].Mutex(redName))
	}
	for _, tc := range []struct {
		kind  string
		group *coordinator.Group
		held  []int
	}{
		{"multilock", nodes.coords[0].MultiLock(nodes.handles(names...)), []int{1}},
		{"redlock", nodes.coords[0].RedLock(nodes.handles(redName)), []int{0, 1}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			if ok, err := tc.group.TryLock(t.Context(), coordinator.Wait(300*time.Millisecond)); ok || err != nil {
				t.Errorf("TryLock(Wait) while other owners hold members = %v, %v; want false, nil", ok, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			err := tc.group.Lock(ctx)
			var why *coordinator.GroupError
			if !errors.Is(err, coordinator.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &why) {
				t.Fatalf("Lock = %v; want ErrNotObtained, DeadlineExceeded and a *GroupError", err)
			}
			t.Logf("Lock: %v", err)
			if why.RedLock != (tc.kind == "redlock") || len(why.Members) != len(tc.held) || why.Attempts < 1 {
				t.Fatalf("GroupError = %+v, want members %v held elsewhere", why, tc.held)
			}
			for i, m := range why.Members {
				if m.Index != tc.held[i] || !errors.Is(m.Err, coordinator.ErrHeldByOther) || m.Name == "" {
					t.Errorf("GroupError member %d = %+v, want member %d held by another owner", i, m, tc.held[i])
				}
			}
			if !errors.Is(err, coordinator.ErrHeldByOther) {
				t.Errorf("Lock error does not match ErrHeldByOther: %v", err)
			}
		})
	}
}

// TestRedLockNodeRestartedEmpty: while A holds a RedLock over 5 nodes, nodes 2, 3 and 4 restart
// empty. B, in another process that has used the nodes before, must not get a majority on the
// restarted nodes while A's lease may still run: a node whose run id changed is kept out for the
// longest lease B knows of (here its watchdog timeout) after B saw the restart.
func TestRedLockNodeRestartedEmpty(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	nodes := groupStart(t, 5, coordinator.WithWatchdogTimeout(lease))
	name := t.Name()
	// Process B: its own coordinators on the same servers.
	bc := make([]*coordinator.Coordinator, 5)
	bms := make([]*coordinator.Mutex, 5)
	for i, srv := range nodes.srvs {
		bc[i] = newCoordinator(t, redis.NewClient(&redis.Options{
			Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		}), coordinator.WithWatchdogTimeout(lease))
		bms[i] = bc[i].Mutex(name)
	}
	b := bc[0].RedLock(bms)
	mustGroupLock(t, b) // B has met the nodes
	mustGroupUnlock(t, b)

	a := nodes.coords[0].RedLock(nodes.handles(name))
	if ok, err := a.TryLock(t.Context(), coordinator.Lease(lease)); !ok || err != nil {
		t.Fatalf("A's TryLock = %v, %v", ok, err)
	}
	validUntil := a.ValidUntil()
	for _, i := range []int{2, 3, 4} {
		nodes.srvs[i].Kill()
		nodes.srvs[i].Restart(t)
	}
	seenAfter := time.Now()
	ok, err := b.TryLock(t.Context(), coordinator.Wait(200*time.Millisecond))
	if ok {
		t.Fatalf("B took the RedLock on the restarted nodes while A's hold is valid until %v (in %v)", validUntil, time.Until(validUntil))
	}
	var why *coordinator.GroupError
	if !errors.As(err, &why) || !errors.Is(err, coordinator.ErrNodeRestarted) {
		t.Fatalf("B's TryLock = %v, %v; want a *GroupError matching ErrNodeRestarted", ok, err)
	}
	t.Logf("B's TryLock: %v", err)
	for _, m := range why.Members {
		want := coordinator.ErrNodeRestarted
		if m.Index < 2 {
			want = coordinator.ErrHeldByOther
		}
		if !errors.Is(m.Err, want) {
			t.Errorf("node %d: %v, want %v", m.Index, m.Err, want)
		}
	}
	// What a refused node granted is given back at once.
	for _, i := range []int{2, 3, 4} {
		groupEventually(t, 200*time.Millisecond, fmt.Sprintf("restarted node %d free", i), func() bool {
			return len(nodes.heldBy(t, i, name)) == 0
		})
	}
	// Once a lease has passed since B saw the restart, the nodes are back.
	if ok, err := b.TryLock(t.Context(), coordinator.Wait(5*time.Second)); !ok || err != nil {
		t.Fatalf("B's TryLock after the grace = %v, %v", ok, err)
	}
	if got := time.Since(seenAfter); got < lease {
		t.Errorf("B got the RedLock %v after the restart was seen, want at least the lease %v", got, lease)
	}
	mustGroupUnlock(t, b)
}

// TestRedLockCloseLeavesNoGoroutines: RedLock coordinators that checked their nodes' run ids, one node
// paused during an attempt, leave no goroutine behind once closed. Not parallel: goleak compares
// against the goroutines at its start.
func TestRedLockCloseLeavesNoGoroutines(t *testing.T) {
	srvs := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	ignore := goleak.IgnoreCurrent()
	var clients []*redis.Client
	var coords []*coordinator.Coordinator
	var ms []*coordinator.Mutex
	for _, srv := range srvs {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		c, err := coordinator.New(client)
		if err != nil {
			t.Fatal(err)
		}
		clients, coords, ms = append(clients, client), append(coords, c), append(ms, c.Mutex(t.Name()))
	}
	group := coords[0].RedLock(ms, coordinator.WithNodeTimeout(100*time.Millisecond))
	mustGroupLock(t, group)
	mustGroupUnlock(t, group)
	srvs[2].Pause()
	if ok, err := group.TryLock(t.Context()); !ok || err != nil {
		t.Fatalf("TryLock with node 2 paused = %v, %v", ok, err)
	}
	mustGroupUnlock(t, group)
	// Resumed before Close: a coordinator whose Redis is paused takes its client's ReadTimeout to
	// close, checks or not.
	srvs[2].Resume()
	for i := range coords {
		_ = coords[i].Close()
		_ = clients[i].Close()
	}
	goleak.VerifyNone(t, ignore)
}

// TestMultiLockMemberWithLaggingReplica: a MultiLock member whose master waits for a replica that
// lags by more than the RedLock default bound (500 ms) but answers within the replica-sync timeout is
// taken: a MultiLock's default bound covers the members' replica sync.
func TestMultiLockMemberWithLaggingReplica(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t)
	_, link := redistest.StartReplicaVia(t, master)
	other := redistest.Start(t)
	lagged := newCoordinator(t, master.Client(t)) // replica sync on, by default, with 1s
	plain := newCoordinator(t, other.Client(t))
	names := groupNames(t, 2)
	members := []*coordinator.Mutex{lagged.Mutex(names[0]), plain.Mutex(names[1])}
	// The first lock counts the master's replicas and loads the scripts, before the lag.
	mustLock(t, members[0])
	mustUnlock(t, members[0])
	link.AddLatency(350 * time.Millisecond) // WAIT's round trip to the replica: 700 ms or more

	group := lagged.MultiLock(members)
	start := time.Now()
	ok, err := group.TryLock(t.Context())
	took := time.Since(start)
	t.Logf("TryLock with a replica lagging 700 ms: %v, %v after %v", ok, err, took)
	if !ok || err != nil {
		t.Fatalf("TryLock = %v, %v; want true", ok, err)
	}
	if took < 700*time.Millisecond {
		t.Errorf("TryLock took %v, want at least the replica's lag of 700ms", took)
	}
	mustGroupUnlock(t, group)
}

// TestRedLockConcurrentHealthyNodes: RedLocks of different names over the same 3 healthy nodes,
// taken concurrently, all succeed: an attempt whose node's run-id check is already running for
// another attempt shares that check's answer rather than counting the node as not answering.
func TestRedLockConcurrentHealthyNodes(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3)
	const workers, rounds = 4, 20
	var mu sync.Mutex
	var failures []error
	var wg sync.WaitGroup
	for w := range workers {
		group := nodes.coords[0].RedLock(nodes.handles(fmt.Sprintf("%s:%d", t.Name(), w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				ok, err := group.TryLock(t.Context(), coordinator.Lease(5*time.Second))
				if !ok {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					continue
				}
				if err := group.Unlock(t.Context()); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Errorf("unlock: %w", err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d uncontended TryLock calls over healthy nodes failed; first: %v", len(failures), workers*rounds, failures[0])
	}
}

// slowInfo is a go-redis hook that delays INFO by d: a node whose INFO is slower than some callers'
// node timeout, while its lock scripts are fast.
type slowInfo struct{ d time.Duration }

func (slowInfo) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowInfo) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "info" {
			time.Sleep(h.d) // the node's latency for INFO, not a wait for an event
		}
		return next(ctx, cmd)
	}
}
func (slowInfo) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedLockSharedRunIDReadOutlastsShortBounds: attempts on a node share one read of its run id, and
// that read is not cut short by the bound of the attempt that happened to start it: a RedLock with a
// node timeout long enough for the node's INFO keeps getting its locks while other RedLocks on the
// same coordinators, with a node timeout shorter than INFO takes, loop beside it.
func TestRedLockSharedRunIDReadOutlastsShortBounds(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3)
	for _, client := range nodes.clients {
		client.AddHook(slowInfo{20 * time.Millisecond})
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range 4 {
		short := nodes.coords[0].RedLock(nodes.handles(fmt.Sprintf("%s:short%d", t.Name(), w)),
			coordinator.WithNodeTimeout(5*time.Millisecond))
		wg.Go(func() {
			for ctx.Err() == nil {
				if ok, _ := short.TryLock(ctx, coordinator.Lease(10*time.Second)); ok {
					_ = short.Unlock(t.Context())
				}
			}
		})
	}
	long := nodes.coords[0].RedLock(nodes.handles(t.Name()+":long"), coordinator.WithNodeTimeout(300*time.Millisecond))
	const rounds = 20
	failed := 0
	var first error
	for range rounds {
		ok, err := long.TryLock(t.Context(), coordinator.Lease(10*time.Second))
		if !ok {
			failed++
			first = cmp.Or(first, err)
			continue
		}
		if err := long.Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	stop()
	wg.Wait()
	if failed > 0 {
		t.Errorf("%d of %d TryLock calls with a 300ms node timeout failed beside 5ms ones; first: %v", failed, rounds, first)
	}
}

// TestRedLockMemberHoldGrantsNoEarlyToken: a plain Mutex waiting on the same name in the coordinator
// of a RedLock member gets the lock from the member's release with a token above the group's (the
// group raised the node's counter past the member's own token): the member's hold does not grant it
// early with its own token plus one.
func TestRedLockMemberHoldGrantsNoEarlyToken(t *testing.T) {
	t.Parallel()
	nodes := groupStart(t, 3, coordinator.WithEarlyHandoffWindow(time.Minute))
	name := t.Name()
	// Node 1's counter is ahead: the group's token, and the floor it raises node 0 to, come from it.
	ahead := time.Now().Add(time.Minute).UnixMicro()
	if err := nodes.clients[1].Set(t.Context(), redisops.TokenKey(name), ahead, 2*time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	g := nodes.coords[0].RedLock(nodes.handles(name))
	mustGroupLock(t, g)
	top := g.Token()
	w := nodes.coords[0].Mutex(name)
	wLocked := lockInBackground(t, w)
	faultWaitSubscribed(t, nodes.clients[0], name, 1) // w waits in node 0's lock actor
	mustGroupUnlock(t, g)
	waitLocked(t, wLocked, 5*time.Second, "the plain waiter")
	if w.Token() <= top {
		t.Errorf("the waiter's token %d is not above the group's %d", w.Token(), top)
	}
	mustUnlock(t, w)
}
