package redisops

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultFairWaitWindow is Redisson's default wait window of a fair lock (threadWaitTime): how long a
// queued waiter may stay silent before the others purge it as gone.
const DefaultFairWaitWindow = 5 * time.Minute

var (
	//go:embed fair_acquire.lua
	fairAcquireSource string
	//go:embed fair_release.lua
	fairReleaseSource string
	//go:embed fair_cancel.lua
	fairCancelSource string
	//go:embed fair_forceunlock.lua
	fairForceUnlockSource string
	//go:embed fair_refresh.lua
	fairRefreshSource string

	fairAcquireScript     = redis.NewScript(withLib(fairAcquireSource))
	fairReleaseScript     = redis.NewScript(withLib(fairReleaseSource))
	fairCancelScript      = redis.NewScript(withLib(fairCancelSource))
	fairForceUnlockScript = redis.NewScript(withLib(fairForceUnlockSource))
	fairRefreshScript     = redis.NewScript(withLib(fairRefreshSource))
)

// FairScripts returns the scripts of the fair lock, so that tests and warm-up code can load them all.
func FairScripts() map[string]*redis.Script {
	return map[string]*redis.Script{
		"fair_acquire":     fairAcquireScript,
		"fair_release":     fairReleaseScript,
		"fair_cancel":      fairCancelScript,
		"fair_forceunlock": fairForceUnlockScript,
		"fair_refresh":     fairRefreshScript,
	}
}

// FairQueueKey returns the key of the LIST of owners waiting for the fair lock name, in arrival order:
// redisson_lock_queue:{N}.
func FairQueueKey(name string) string { return prefixed("redisson_lock_queue", name) }

// FairTimeoutKey returns the key of the ZSET owner -> absolute time in ms after which that waiter of the
// fair lock name counts as gone: redisson_lock_timeout:{N}.
func FairTimeoutKey(name string) string { return prefixed("redisson_lock_timeout", name) }

// FairHandoffKey returns the key of the HASH owner -> "lease:window:wait id" (lease and window in ms) of
// the waiters of the fair lock name that registered for handoffs ([Ops.FairWait]):
// lockwarden_fair_handoff:{N}. Redisson does not know this key.
func FairHandoffKey(name string) string { return prefixed("lockwarden_fair_handoff", name) }

// FairGrantPrefix starts the message that tells a waiter registered for handoffs, on its
// [FairChannelName], that a release handed it the fair lock: "<prefix><token>:<wait id>", with the owner's
// fencing token and the id of the wait that registered ([Ops.FairWait]).
const FairGrantPrefix = "lockwarden:granted:"

// ParseFairGrant reports whether payload, a message on a [FairChannelName], says that the lock was handed
// to that channel's owner, and returns the owner's fencing token and the id of the wait it was for.
func ParseFairGrant(payload string) (token int64, waitID string, ok bool) {
	rest, found := strings.CutPrefix(payload, FairGrantPrefix)
	if !found {
		return 0, "", false
	}
	tok, id, found := strings.Cut(rest, ":")
	if !found || id == "" {
		return 0, "", false
	}
	token, err := strconv.ParseInt(tok, 10, 64)
	if err != nil || token <= 0 {
		return 0, "", false
	}
	return token, id, true
}

// FairChannelName returns the pub/sub channel on which owner is told that the fair lock name is free and
// owner is at the head of its queue: redisson_lock__channel:{N}:<owner>.
func FairChannelName(name, owner string) string { return ChannelName(name) + ":" + owner }

// FairAcquire makes one attempt at the fair lock name for owner with the given lease. The lock is the
// same hash as the plain lock, so [Ops.Renew] and [Ops.Status] work on it unchanged, and every
// acquisition, re-entry included, issues a fencing token as [Ops.Acquire] does. held is as in
// [Ops.Acquire]: with a known count (>= 0) the call is retry-safe.
//
// The owner gets the lock only when it is free and the queue is empty or owner is at its head. Waiters
// at the head whose window has passed are purged first. When the lock is free and another waiter is at
// the head, that waiter is told on its [FairChannelName], as a release would: it may have become the
// head by a purge or by a lease that ran out, which tell nobody. When owner does not get the lock and enqueue is
// true, it takes its place at the tail of the queue, or keeps the place and score it has; Acquired.TTL
// is then the longest to wait before trying again, at least 1 ms: the lock's PTTL while it is held
// (an expiring lease publishes nothing), at most 1 s while it is free and another waiter is at the
// head. Trying again does not move a waiter's deadline: once it passes, the others purge the waiter,
// as in Redisson; a waiter that gives up calls [Ops.FairCancel]. With enqueue false the call is a
// single attempt that never queues owner (Redisson's tryLock without wait); Acquired.TTL is then the
// lock's PTTL (-1 when it has no expiry), or the time until the head waiter's window ends when the lock
// is free but others are queued.
//
// waitWindow is how long a queued waiter may stay silent before the others purge it as gone (Redisson's
// threadWaitTime, [DefaultFairWaitWindow]); all callers on one lock should use the same value. The
// scores are computed from the Redis server's clock (TIME), not the client's, so clients whose clocks
// drift apart still agree on them.
//
// With the replica-sync safeguard on ([Ops.SetReplicaSync]), a hold that too few replicas acknowledge
// is given back and the call returns an error matching [ErrNotSynced].
func (o *Ops) FairAcquire(ctx context.Context, name, owner string, lease, waitWindow time.Duration, held int64, enqueue bool) (Acquired, error) {
	queue := "0"
	if enqueue {
		queue = "1"
	}
	return o.fairAcquire(ctx, name, owner, lease, waitWindow, held, queue, "0", "", "0")
}

// FairQueue is [Ops.FairAcquire] with enqueue true for an owner that keeps its place alive with
// [Ops.FairRefresh] while it waits: its deadline in the timeouts is one waitWindow from now when it
// queues, and is raised to that whenever it tries again, instead of Redisson's (the previous waiter's
// deadline, or the lock's expiry, plus waitWindow, never moved). A waiter that stops (its process died)
// then lapses one waitWindow after its last refresh, however many waiters stand ahead of it and however
// long the holder's lease: dead waiters do not add up.
func (o *Ops) FairQueue(ctx context.Context, name, owner string, lease, waitWindow time.Duration, held int64) (Acquired, error) {
	return o.fairAcquire(ctx, name, owner, lease, waitWindow, held, "1", "0", "", "1")
}

// FairWait is [Ops.FairAcquire] with enqueue true for an owner that also registers for handoffs: when
// it is at the head of the queue as the holder's last hold goes, [Ops.FairRelease] gives it the lock
// with lease in the same call and publishes [FairGrantPrefix], its fencing token and waitID on its
// [FairChannelName]. The owner then holds the lock without asking again. waitID names this wait
// (unique for the caller, never empty), so that the caller can tell which of its calls the grant is for,
// and a stale notice of an earlier wait. A registration lives as long as the owner's place in the
// queue: it goes when the owner gets the lock, leaves ([Ops.FairLeave]) or is purged, and a later
// FairWait of the owner replaces it.
//
// The owner keeps its place alive as with [Ops.FairQueue]: it must call [Ops.FairRefresh] while it
// waits.
//
// While the replica-sync safeguard of o would WAIT after a grant ([Ops.SetReplicaSync]), FairWait does
// not register (a grant by a release without WAIT would escape it) and is FairQueue.
//
// The owner must learn of a grant: it listens on its channel, and an attempt of its own made after a
// grant it missed (with held as it knew it, 0) finds the hold and answers OK without taking a second
// one. An owner whose caller gives up must leave with [Ops.FairLeave], which also gives back a handoff it
// did not learn of. An owner id used by several processes at once must not register: use
// [Ops.FairAcquire].
func (o *Ops) FairWait(ctx context.Context, name, owner string, lease, waitWindow time.Duration, held int64, waitID string) (Acquired, error) {
	if waitID == "" {
		return Acquired{}, fmt.Errorf("lockwarden: fair wait %q: empty wait id", name)
	}
	if o.syncsGrants(ctx, LockKey(name)) {
		return o.fairAcquire(ctx, name, owner, lease, waitWindow, held, "1", "0", "", "1")
	}
	return o.fairAcquire(ctx, name, owner, lease, waitWindow, held, "1", "1", waitID, "1")
}

func (o *Ops) fairAcquire(ctx context.Context, name, owner string, lease, waitWindow time.Duration, held int64, queue, register, waitID, alive string) (Acquired, error) {
	reply, syncErr := o.runScript(ctx, o.undoFair(name, owner, lease), fairAcquireScript,
		[]string{LockKey(name), FairQueueKey(name), FairTimeoutKey(name), TokenKey(name), FairHandoffKey(name)},
		millis(lease), owner, held, millis(waitWindow), queue, register, waitID, alive,
		UnlockMessage, o.publish, ChannelName(name), o.tokenMillis())
	vals, err := reply.Int64Slice()
	if err == nil {
		err = syncErr
	}
	if err != nil {
		return Acquired{}, fmt.Errorf("lockwarden: fair acquire %q: %w", name, typed(err))
	}
	if len(vals) == 3 && vals[0] == 1 {
		return Acquired{OK: true, HoldCount: vals[1], Token: vals[2]}, nil
	}
	if len(vals) == 3 && vals[0] == 0 {
		return Acquired{TTL: ttlFromMillis(vals[1]), Watermark: vals[2]}, nil
	}
	return Acquired{}, fmt.Errorf("lockwarden: fair acquire %q: unexpected reply %v", name, vals)
}

// FairPlace names a waiter of a fair lock whose place [Ops.FairRefresh] keeps alive.
type FairPlace struct {
	// Owner is the waiter's owner id, as it queued.
	Owner string
	// WaitWindow is the waiter's window: its deadline is raised to this long from now (rounded up to
	// whole milliseconds).
	WaitWindow time.Duration
}

// FairPlaceState is what [Ops.FairRefresh] found of one place.
type FairPlaceState int

const (
	// FairPlaceGone: the owner is not queued (purged after a pause longer than its window, or handed
	// the lock by a release). It must try again with an attempt of its own, which queues it again at
	// the tail or finds its hold.
	FairPlaceGone FairPlaceState = iota
	// FairPlaceQueued: the owner is queued, and its deadline is at least one window from now.
	FairPlaceQueued
	// FairPlaceHead: as FairPlaceQueued, and the owner is at the head of the queue while the lock is
	// free: it should try now.
	FairPlaceHead
)

// FairRefresh keeps the places of live waiters queued with [Ops.FairQueue] or [Ops.FairWait] on the
// fair lock name: the deadline of each is raised to one WaitWindow from now (never lowered). A waiter
// should call it about every third of its window, so that only a waiter that stopped lapses. Waiters at
// the head whose deadline has passed are purged first and, when the lock is free, the waiter then at the
// head is told on its [FairChannelName]: dead waiters in front of live ones are cleared even while
// nobody tries. It reports, for each place in order, what it found.
func (o *Ops) FairRefresh(ctx context.Context, name string, places []FairPlace) ([]FairPlaceState, error) {
	if len(places) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 3+2*len(places))
	args = append(args, UnlockMessage, o.publish, ChannelName(name))
	for _, p := range places {
		args = append(args, p.Owner, millis(p.WaitWindow))
	}
	vals, err := o.do(ctx, fairRefreshScript,
		[]string{LockKey(name), FairQueueKey(name), FairTimeoutKey(name), FairHandoffKey(name)}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("lockwarden: fair refresh %q: %w", name, err)
	}
	if len(vals) != len(places) {
		return nil, fmt.Errorf("lockwarden: fair refresh %q: unexpected reply %v", name, vals)
	}
	states := make([]FairPlaceState, len(vals))
	for i, v := range vals {
		states[i] = FairPlaceState(v)
	}
	return states, nil
}

// FairCancel removes owner, a waiter that gave up, from the queue of the fair lock name. Every waiter
// behind it moves up one place, so its score moves back by waitWindow, but not below one waitWindow
// from now (the deadline of a waiter that keeps its place alive). When owner was at the head and
// the lock is free, the new head is told at once on its [FairChannelName]. It reports whether owner was
// queued.
func (o *Ops) FairCancel(ctx context.Context, name, owner string, waitWindow time.Duration) (bool, error) {
	return o.fairCancel(ctx, name, owner, waitWindow, "0")
}

// FairLeave is [Ops.FairCancel] for an owner that waited with [Ops.FairWait] and holds nothing as far as
// its caller knows: when owner is no longer queued but holds the lock once, that hold is a handoff its
// caller gave up on before it learnt of it, and it is released (the new head is told). It reports
// whether owner was queued or such a hold was released.
func (o *Ops) FairLeave(ctx context.Context, name, owner string, waitWindow time.Duration) (bool, error) {
	return o.fairCancel(ctx, name, owner, waitWindow, "1")
}

func (o *Ops) fairCancel(ctx context.Context, name, owner string, waitWindow time.Duration, unclaimed string) (bool, error) {
	n, err := o.do(ctx, fairCancelScript,
		[]string{LockKey(name), FairQueueKey(name), FairTimeoutKey(name), FairHandoffKey(name)},
		owner, millis(waitWindow), UnlockMessage, o.publish, ChannelName(name), unclaimed).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: fair cancel %q: %w", name, typed(err))
	}
	return n == 1, nil
}

// FairRelease drops one hold of owner on the fair lock name. While holds remain, the lock's expiry is
// reset to lease. When the last hold goes, waiters whose window has passed are purged from the head of
// the queue first. Then the lock goes straight to the waiter now at the head, in the same call and
// exactly as if it had won [Ops.FairAcquire] (it leaves the queue, the scores of the waiters behind it
// move back by one wait window when it had a score, it holds the lock once and gets a new fencing
// token), when that waiter is
//   - next.Owner (next not nil): it gets next.Lease and nothing is published, since the caller grants
//     it; the answer is Released{HandedOff: true, Token: its token, Next: next.Owner};
//   - or a waiter registered with [Ops.FairWait] whose registered lease ends before its deadline in
//     the timeouts (so that a dead waiter holds the lock up no longer than its place would have), as
//     long as no WAIT would follow the call (the replica-sync safeguard is off or the master has no
//     replica: a grant that WAIT could take back must not be announced): it gets its registered lease
//     and is told on its [FairChannelName] with [FairGrantPrefix], its token and its wait id; the answer
//     is Released{Registered: true, Token, Next}.
//
// A next that is not the head gets nothing, so the queue order stays strict; next.OnlyIfAlone is
// ignored. Otherwise (another head, or an empty queue) the lock is deleted and [UnlockMessage] is
// published on the [FairChannelName] of the head waiter, if any; Released.Next names that waiter.
// The scores move back by next.WaitWindow for next (0 moves none), by its registered window for a
// registered waiter; all callers on one lock should use the same window. Nothing is ever published on
// the plain [ChannelName].
//
// requestID makes the call retry-safe, with the same latch as [Ops.Release]: a retry with the same id
// returns the first answer, handoff, token and Next included, and neither releases nor hands off again.
// It returns [ErrNotHeld] when owner holds nothing.
//
// With the replica-sync safeguard on ([Ops.SetReplicaSync]), a handoff to next that too few replicas
// acknowledge is given back (the lock is then free and its waiters told) and reported in
// [Released.NotSynced].
func (o *Ops) FairRelease(ctx context.Context, name, owner, requestID string, lease time.Duration, next *Handoff) (Released, error) {
	nextOwner, nextLease, nextWindow := "", int64(0), int64(0)
	if next != nil {
		nextOwner, nextLease = next.Owner, millis(next.Lease)
		if next.WaitWindow > 0 {
			nextWindow = millis(next.WaitWindow)
		}
	}
	undo, registered := o.undoFairHandoff(name, next), "0"
	if !o.syncsGrants(ctx, LockKey(name)) {
		// No WAIT follows (undo would not be used): a grant to a registered waiter is final.
		undo, registered = nil, "1"
	}
	reply, syncErr := o.runScript(ctx, undo, fairReleaseScript,
		[]string{LockKey(name), FairQueueKey(name), FairTimeoutKey(name), UnlockLatchKey(name, requestID),
			TokenKey(name), FairHandoffKey(name)},
		millis(lease), owner, UnlockMessage, millis(o.latchExpiry), o.publish, ChannelName(name),
		nextOwner, nextLease, nextWindow, registered, FairGrantPrefix, o.tokenMillis())
	vals, err := reply.Slice()
	if err != nil {
		return Released{}, fmt.Errorf("lockwarden: fair release %q: %w", name, typed(err))
	}
	if len(vals) != 4 {
		return Released{}, fmt.Errorf("lockwarden: fair release %q: unexpected reply %v", name, vals)
	}
	remaining, ok1 := vals[0].(int64)
	token, ok2 := vals[1].(int64)
	nextHolder, ok3 := vals[2].(string)
	toRegistered, ok4 := vals[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return Released{}, fmt.Errorf("lockwarden: fair release %q: unexpected reply %v", name, vals)
	}
	if remaining < 0 {
		return Released{}, ErrNotHeld
	}
	rel := Released{Remaining: remaining, Token: token, Next: nextHolder,
		HandedOff: token > 0 && toRegistered == 0, Registered: toRegistered == 1}
	if syncErr != nil {
		// The handoff was given back: the lock is free, and that release told the new head.
		rel = Released{Remaining: remaining, NotSynced: syncErr}
	}
	return rel, nil
}

// FairForceUnlock deletes the fair lock name whoever holds it. It purges the waiters whose window has
// passed and, when a lock was deleted, publishes [UnlockMessage] on the [FairChannelName] of the waiter
// at the head of the queue. It reports whether a lock was deleted.
func (o *Ops) FairForceUnlock(ctx context.Context, name string) (bool, error) {
	n, err := o.do(ctx, fairForceUnlockScript,
		[]string{LockKey(name), FairQueueKey(name), FairTimeoutKey(name), FairHandoffKey(name)},
		UnlockMessage, o.publish, ChannelName(name)).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: fair force unlock %q: %w", name, typed(err))
	}
	return n == 1, nil
}
