package redisops_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

// handoffWindow is the wait window of the waiters registered for handoffs in these tests: long enough
// for their deadline (one window from now, as they keep their places alive) to end after the lease.
const handoffWindow = 2 * lease

// fairWait queues owner with FairWait (registered for handoffs), with a known hold count of 0, and fails
// unless it is queued without the lock.
func fairWait(t *testing.T, ops *redisops.Ops, name, owner string, l, w time.Duration) {
	t.Helper()
	got, err := ops.FairWait(t.Context(), name, owner, l, w, 0, "w-"+owner)
	if err != nil || got.OK {
		t.Fatalf("FairWait(%q, %q) = %+v, %v; want queued without the lock", name, owner, got, err)
	}
}

// checkRegistered fails unless the handoff registrations of name are exactly want (owner -> "lease:window"
// in ms).
func checkRegistered(t *testing.T, c *redis.Client, name string, want map[string]string) {
	t.Helper()
	if len(want) == 0 {
		checkGone(t, c, redisops.FairHandoffKey(name))
		return
	}
	checkHash(t, c, redisops.FairHandoffKey(name), want)
}

// registration is the value fairWait registers for owner with a lease and a wait window.
func registration(owner string, l, w time.Duration) string {
	return strconv.FormatInt(l.Milliseconds(), 10) + ":" + strconv.FormatInt(w.Milliseconds(), 10) + ":w-" + owner
}

// grantMessage is the notice a waiter queued by fairWait gets when a release hands it the lock.
func grantMessage(owner string, token int64) string {
	return redisops.FairGrantPrefix + strconv.FormatInt(token, 10) + ":w-" + owner
}

func TestFairHandoffKeyAndGrantMessage(t *testing.T) {
	t.Parallel()
	if got, want := redisops.FairHandoffKey("orders"), "lockwarden_fair_handoff:{orders}"; got != want {
		t.Errorf("FairHandoffKey: got %q, want %q", got, want)
	}
	for _, tc := range []struct {
		payload string
		token   int64
		waitID  string
		ok      bool
	}{
		{redisops.FairGrantPrefix + "42:c1:r7", 42, "c1:r7", true},
		{redisops.UnlockMessage, 0, "", false},
		{redisops.FairGrantPrefix, 0, "", false},
		{redisops.FairGrantPrefix + "42", 0, "", false},
		{redisops.FairGrantPrefix + "42:", 0, "", false},
		{redisops.FairGrantPrefix + "x:r1", 0, "", false},
		{redisops.FairGrantPrefix + "0:r1", 0, "", false},
		{redisops.FairGrantPrefix + "-3:r1", 0, "", false},
	} {
		token, waitID, ok := redisops.ParseFairGrant(tc.payload)
		if ok != tc.ok || token != tc.token || waitID != tc.waitID {
			t.Errorf("ParseFairGrant(%q) = %d, %q, %v; want %d, %q, %v", tc.payload, token, waitID, ok, tc.token, tc.waitID, tc.ok)
		}
	}
}

// TestFairWaitHandoff: a waiter registered with FairWait gets the lock from the release that frees it,
// in the same call, and is told so on its channel with its token; its own later attempt finds the hold
// (as a retry) instead of taking a second one.
func TestFairWaitHandoff(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("to the registered head", func(t *testing.T) {
		name := t.Name()
		// B's lease ends before its deadline (A's lease plus one window): it may be handed the lock.
		const bLease = lease + 5*time.Second
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
		prev := mustFairAcquire(t, ops, name, "A", lease)
		fairWait(t, ops, name, "B", bLease, handoffWindow)
		fairWait(t, ops, name, "C", lease, handoffWindow)
		checkRegistered(t, c, name, map[string]string{"B": registration("B", bLease, handoffWindow),
			"C": registration("C", lease, handoffWindow)})
		c0 := fairScore(t, c, name, "C")

		got := fairReleaseWith(t, ops, name, "A", "r1", nil)
		if want := (redisops.Released{Registered: true, Token: prev.Token + 1, Next: "B"}); got != want {
			t.Fatalf("FairRelease: got %+v, want %+v", got, want)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
		checkPTTL(t, c, redisops.LockKey(name), bLease) // B's registered lease, not the releaser's
		checkFairQueue(t, c, name, "C")
		// C keeps its place alive: its deadline, one window from when it queued, does not move back
		// below one window from now.
		if c1 := fairScore(t, c, name, "C"); c1 != c0 {
			t.Errorf("C's score: got %d, want %d (unchanged)", c1, c0)
		}
		checkRegistered(t, c, name, map[string]string{"C": registration("C", lease, handoffWindow)})
		if msg, want := nextMessage(t, psB), grantMessage("B", got.Token); msg != want {
			t.Errorf("message to B: got %q, want %q", msg, want)
		}
		expectNoMessage(t, c, psC, redisops.FairChannelName(name, "C"))

		// B's own attempt after the grant (it missed the notice) finds its hold, with a fresh token
		// (the notice's was never used).
		again, err := ops.FairWait(t.Context(), name, "B", bLease, handoffWindow, 0, "w-B")
		if want := (redisops.Acquired{OK: true, HoldCount: 1, Token: got.Token + 1}); err != nil || again != want {
			t.Fatalf("FairWait by B after the grant = %+v, %v; want %+v", again, err, want)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})

		// A retry of A's release answers the same, and hands nothing off again.
		if retry := fairReleaseWith(t, ops, name, "A", "r1", nil); retry != got {
			t.Errorf("retried FairRelease: got %+v, want %+v", retry, got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})

		// B's release hands the lock on to C.
		next := fairReleaseWith(t, ops, name, "B", "r2", nil)
		if want := (redisops.Released{Registered: true, Token: again.Token + 1, Next: "C"}); next != want {
			t.Errorf("B's FairRelease: got %+v, want %+v", next, want)
		}
		checkFairQueue(t, c, name)
		checkRegistered(t, c, name, nil)
		fairReleaseWith(t, ops, name, "C", "r3", nil)
		checkGone(t, c, redisops.LockKey(name))
	})

	t.Run("a local next owner first", func(t *testing.T) {
		// The caller's own next owner is granted by the caller: nothing is published.
		name := t.Name()
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		mustFairAcquire(t, ops, name, "A", lease)
		fairWait(t, ops, name, "B", lease, handoffWindow)
		got := fairReleaseWith(t, ops, name, "A", "r1", &redisops.Handoff{Owner: "B", Lease: longLease, WaitWindow: handoffWindow})
		if !got.HandedOff || got.Registered || got.Next != "B" {
			t.Fatalf("FairRelease with next B: got %+v, want a handoff to B that is not Registered", got)
		}
		checkPTTL(t, c, redisops.LockKey(name), longLease)
		checkRegistered(t, c, name, nil)
		expectNoMessage(t, c, psB, redisops.FairChannelName(name, "B"))
	})

	t.Run("an unregistered head is told 0", func(t *testing.T) {
		name := t.Name()
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		mustFairAcquire(t, ops, name, "A", lease)
		fairWait(t, ops, name, "B", lease, handoffWindow)
		// Queueing again through FairAcquire drops the registration (an owner id that became shared).
		mustFairQueue(t, ops, name, "B", handoffWindow)
		checkRegistered(t, c, name, nil)
		if got := fairReleaseWith(t, ops, name, "A", "r1", nil); got != (redisops.Released{Next: "B"}) {
			t.Fatalf("FairRelease: got %+v, want the lock freed and B told", got)
		}
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
			t.Errorf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
		}
	})

	t.Run("not past the waiter's deadline", func(t *testing.T) {
		// B's lease would outlast its place: were B dead, the lock would be held up longer than the
		// queue holds it up for a dead waiter. B is told 0 instead and takes the lock itself.
		name := t.Name()
		psB := subscribe(t, c, redisops.FairChannelName(name, "B"))
		mustFairAcquire(t, ops, name, "A", time.Second)
		fairWait(t, ops, name, "B", longLease, 2*time.Second) // deadline about 3 s from now
		if got := fairReleaseWith(t, ops, name, "A", "r1", nil); got != (redisops.Released{Next: "B"}) {
			t.Fatalf("FairRelease: got %+v, want the lock freed and B told", got)
		}
		if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
			t.Errorf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
		}
		checkRegistered(t, c, name, map[string]string{"B": registration("B", longLease, 2*time.Second)})
		got, err := ops.FairWait(t.Context(), name, "B", longLease, 2*time.Second, 0, "w-B")
		if err != nil || !got.OK {
			t.Fatalf("FairWait by B after the notice = %+v, %v; want the lock", got, err)
		}
		checkRegistered(t, c, name, nil)
	})

	t.Run("a purged waiter's registration goes", func(t *testing.T) {
		name := t.Name()
		psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
		mustFairAcquire(t, ops, name, "A", lease)
		fairWait(t, ops, name, "B", lease, handoffWindow)
		fairWait(t, ops, name, "C", lease, handoffWindow)
		fairExpire(t, c, name, "B") // B died long ago
		got := fairReleaseWith(t, ops, name, "A", "r1", nil)
		if !got.Registered || got.Next != "C" {
			t.Fatalf("FairRelease: got %+v, want the lock handed to C past the purged B", got)
		}
		checkRegistered(t, c, name, nil)
		checkFairQueue(t, c, name)
		if msg := nextMessage(t, psC); msg != grantMessage("C", got.Token) {
			t.Errorf("message to C: got %q", msg)
		}
	})

	t.Run("the registration expires with the last deadline", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		fairWait(t, ops, name, "B", lease, handoffWindow)
		ttl, err := c.PTTL(t.Context(), redisops.FairHandoffKey(name)).Result()
		want := time.Duration(fairScore(t, c, name, "B")-fairServerMillis(t, c)) * time.Millisecond
		if err != nil || ttl <= 0 || ttl > want+time.Second || ttl < want-time.Second {
			t.Errorf("PTTL of the registrations: got %v, %v; want about %v (B's deadline)", ttl, err, want)
		}
	})
}

// TestFairLeave: a waiter whose caller gave up while a release handed it the lock gives the hold back
// with FairLeave, and the next waiter is told; FairCancel leaves such a hold alone.
func TestFairLeave(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("gives an unclaimed handoff back", func(t *testing.T) {
		name := t.Name()
		psC := subscribe(t, c, redisops.FairChannelName(name, "C"))
		mustFairAcquire(t, ops, name, "A", lease)
		fairWait(t, ops, name, "B", lease, handoffWindow)
		mustFairQueue(t, ops, name, "C", handoffWindow) // C is not registered: it is told 0
		if got := fairReleaseWith(t, ops, name, "A", "r1", nil); !got.Registered || got.Next != "B" {
			t.Fatalf("FairRelease: got %+v, want the lock handed to B", got)
		}
		if ok, err := ops.FairLeave(t.Context(), name, "B", handoffWindow); err != nil || !ok {
			t.Fatalf("FairLeave(B) = %v, %v; want true", ok, err)
		}
		checkGone(t, c, redisops.LockKey(name))
		checkFairQueue(t, c, name, "C")
		if msg := nextMessage(t, psC); msg != redisops.UnlockMessage {
			t.Errorf("message to C: got %q, want %q", msg, redisops.UnlockMessage)
		}
		if ok, err := ops.FairLeave(t.Context(), name, "B", handoffWindow); err != nil || ok {
			t.Errorf("second FairLeave(B) = %v, %v; want false", ok, err)
		}
	})

	t.Run("leaves a queued waiter's place and registration", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		fairWait(t, ops, name, "B", lease, handoffWindow)
		if ok, err := ops.FairLeave(t.Context(), name, "B", handoffWindow); err != nil || !ok {
			t.Fatalf("FairLeave(B) = %v, %v; want true", ok, err)
		}
		checkFairQueue(t, c, name)
		checkRegistered(t, c, name, nil)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"A": "1"}) // A's hold stays
	})

	t.Run("never touches a hold of more than one", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "B", lease)
		mustFairAcquire(t, ops, name, "B", lease)
		if ok, err := ops.FairLeave(t.Context(), name, "B", handoffWindow); err != nil || ok {
			t.Fatalf("FairLeave(B) of a re-entered holder = %v, %v; want false", ok, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "2"})
	})

	t.Run("FairCancel leaves the hold", func(t *testing.T) {
		name := t.Name()
		mustFairAcquire(t, ops, name, "A", lease)
		fairWait(t, ops, name, "B", lease, handoffWindow)
		fairReleaseWith(t, ops, name, "A", "r1", nil)
		if ok, err := ops.FairCancel(t.Context(), name, "B", handoffWindow); err != nil || ok {
			t.Fatalf("FairCancel(B) = %v, %v; want false", ok, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"B": "1"})
	})
}

// TestFairWaitHandoffNotWithReplicaSync: while the replica-sync safeguard would WAIT after a grant, a
// release does not hand the lock to a registered waiter (a grant the WAIT may take back must not be
// announced), and a waiter whose own safeguard would WAIT does not register, so that a release by a
// client without the safeguard cannot give it a hold no WAIT covered. Either way the waiter is told 0.
func TestFairWaitHandoffNotWithReplicaSync(t *testing.T) {
	_, _, client := startWithReplica(t)
	synced, plain := syncedOps(client), redisops.New(client)

	t.Run("the releaser waits for replicas", func(t *testing.T) {
		name := t.Name()
		psB := subscribe(t, client, redisops.FairChannelName(name, "B"))
		mustFairAcquire(t, synced, name, "A", lease)
		fairWait(t, plain, name, "B", lease, handoffWindow)
		checkRegistered(t, client, name, map[string]string{"B": registration("B", lease, handoffWindow)})
		if got := fairReleaseWith(t, synced, name, "A", "r1", nil); got != (redisops.Released{Next: "B"}) {
			t.Fatalf("FairRelease with replica sync: got %+v, want the lock freed and B told", got)
		}
		if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
			t.Errorf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
		}
	})

	t.Run("the waiter waits for replicas", func(t *testing.T) {
		name := t.Name()
		psB := subscribe(t, client, redisops.FairChannelName(name, "B"))
		mustFairAcquire(t, plain, name, "A", lease)
		fairWait(t, synced, name, "B", lease, handoffWindow)
		checkRegistered(t, client, name, nil)
		if got := fairReleaseWith(t, plain, name, "A", "r1", nil); got != (redisops.Released{Next: "B"}) {
			t.Fatalf("FairRelease without replica sync: got %+v, want the lock freed and B told", got)
		}
		if msg := nextMessage(t, psB); msg != redisops.UnlockMessage {
			t.Errorf("message to B: got %q, want %q", msg, redisops.UnlockMessage)
		}
	})
}
