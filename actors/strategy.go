package actors

import (
	"context"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// strategy is everything in which one family of locks differs from the others: its Redis calls
// (protocol), and the decisions that the lock actor's core (queue, holds, renewal, subscriptions,
// events) leaves to it. The core never asks which family it serves; it asks its strategy. A strategy
// keeps no state of its own but the keys of its name: what it needs of the actor it reads from the
// actor it is given.
//
// exclusive gives the behaviour of a lock with one exclusive kind, which a strategy embeds and then
// overrides where its family differs.
type strategy interface {
	protocol

	// lockKind names the family in telemetry (the spans of the watchdog's ticks).
	lockKind() messages.LockKind
	// releaseHeld is release, told the owner's hold count held as the actor knows it
	// (redisops.UnknownHoldCount when it does not), and token, the hold's fencing token when the
	// release may be checked by the token counter rather than by an unlock latch (hold.fencedToken),
	// else 0; a family whose scripts take no count, or no token, ignores them.
	releaseHeld(ctx context.Context, k holdKey, requestID string, lease time.Duration, held, token int64, next *redisops.Handoff) (redisops.Released, error)
	// renewKind is the kind of renewal (the Redis-level notion) of a hold of kind k.
	renewKind(k Kind) redisops.RenewKind

	// shares reports whether an acquisition of kind m may be granted next to another owner's hold of
	// kind held.
	shares(m, held Kind) bool
	// enteredThrough names the other kind of the owner's holds that lets an acquisition of kind k in at
	// once, as a re-entry does (a writer taking read holds), and reports whether there is one.
	enteredThrough(k Kind) (Kind, bool)
	// refusesUpgrade reports whether m asks for a kind that its owner's holds of another kind forbid
	// (the write side of a read-write lock while holding only read holds).
	refusesUpgrade(a *lockActor, m *Acquire) bool
	// queuesInRedis reports whether a waiter takes a place in a queue in Redis: then it tries on
	// arrival, even behind local waiters, so that the order across processes is the order of arrival.
	queuesInRedis() bool
	// beginAttempt prepares m for an attempt (a fair waiter's wait id).
	beginAttempt(a *lockActor, m *Acquire)
	// async reports whether the family's calls may go to Redis without the actor waiting for them
	// (startCall); the calls of the others are made in turn, the actor waiting for each.
	async() bool
	// batches reports whether calls on holds of kind k go to Redis in read batches (batch.go).
	batches(k Kind) bool
	// readNames are the keys of the lock's read side, for the read batches; nil for a family whose
	// calls do not batch.
	readNames() *redisops.RWNames
	// reentryRaisesExpiry reports whether a re-entry of kind k only ever raises the lock's expiry in
	// Redis, so that the hold's validity is never cut to the re-entry's.
	reentryRaisesExpiry(k Kind) bool
	// releaseRaisesExpiry reports whether a release of kind k that leaves holds only ever raises the
	// lock's expiry in Redis, rather than setting it to the hold's lease.
	releaseRaisesExpiry(k Kind) bool
	// handoffCandidate returns the local waiter that the release of owner's last hold may hand the
	// lock to in the same call, or nil.
	handoffCandidate(a *lockActor, owner string) *Acquire
	// freed runs once the release m freed the lock with no local handoff, and m's caller was
	// answered: it wakes the local waiters that may take it now.
	freed(a *lockActor, m *Release, rel redisops.Released)
	// forceUnlockKeepsHolds reports whether a force unlock that deleted nothing leaves the local
	// holds (a read-write lock is only force-unlocked in the mode asked for).
	forceUnlockKeepsHolds() bool
	// headKeepsOut reports whether the waiter at the head of the queue keeps the waiters behind it
	// out, so that they are tried again when it leaves.
	headKeepsOut() bool
	// keepsInRedis reports whether the waiter m keeps something in Redis while it waits (a queue
	// place, a writer's intent) that it gives up when it leaves (protocol.leave).
	keepsInRedis(m *Acquire) bool
	// leaveFailed handles the failed leave of gone, and reports whether the leave is retried (gone
	// then keeps its reservation until it is done).
	leaveFailed(a *lockActor, gone *Acquire, err error) bool
	// subscribed runs when the bridge confirmed the subscription of channel.
	subscribed(a *lockActor, channel string)
	// notice takes a message published on a subscribed channel.
	notice(a *lockActor, m *messages.Notice)
	// keepChannels adds to want, the channels the waiters are woken on, the subscribed channels to
	// keep.
	keepChannels(a *lockActor, want map[string]struct{})
	// tend keeps what the family's waiters keep alive in Redis in line with the state, after every
	// message (a writer's intent, fair queue places).
	tend(a *lockActor)
}

// exclusive is the behaviour of a lock with one exclusive kind, held by one owner at a time; the
// strategies embed it.
type exclusive struct{}

func (exclusive) renewKind(Kind) redisops.RenewKind            { return redisops.RenewLock }
func (exclusive) shares(Kind, Kind) bool                       { return false }
func (exclusive) enteredThrough(Kind) (Kind, bool)             { return 0, false }
func (exclusive) refusesUpgrade(*lockActor, *Acquire) bool     { return false }
func (exclusive) queuesInRedis() bool                          { return false }
func (exclusive) beginAttempt(*lockActor, *Acquire)            {}
func (exclusive) async() bool                                  { return false }
func (exclusive) batches(Kind) bool                            { return false }
func (exclusive) readNames() *redisops.RWNames                 { return nil }
func (exclusive) reentryRaisesExpiry(Kind) bool                { return false }
func (exclusive) releaseRaisesExpiry(Kind) bool                { return false }
func (exclusive) forceUnlockKeepsHolds() bool                  { return false }
func (exclusive) headKeepsOut() bool                           { return false }
func (exclusive) keepsInRedis(*Acquire) bool                   { return false }
func (exclusive) subscribed(a *lockActor, _ string)            { a.tryHead() }
func (exclusive) tend(*lockActor)                              {}
func (exclusive) handoffCandidate(*lockActor, string) *Acquire { return nil }

// leaveFailed: the place or intent lapses by itself.
func (exclusive) leaveFailed(a *lockActor, gone *Acquire, err error) bool {
	a.log().Warn("leaving the queue failed; what the waiter left lapses by itself", "owner", gone.Owner, "err", err)
	return false
}

// freed: the unlock notice, our own included, wakes the head waiter, so that waiters in other
// processes race on equal terms; a release that handed the lock to a registered waiter says so.
func (exclusive) freed(a *lockActor, m *Release, rel redisops.Released) {
	if rel.Registered {
		a.emitRegisteredHandoff(m, rel)
	}
}

// keepChannels keeps the lock's channel subscribed until the actor is idle, so that busy locks don't
// subscribe and unsubscribe on every handoff.
func (exclusive) keepChannels(a *lockActor, want map[string]struct{}) {
	if !a.isIdle() {
		for ch := range a.subs {
			want[ch] = struct{}{}
		}
	}
}

// isUnlockNotice reports whether payload is an unlock notice of a plain, fair or read-write lock.
func isUnlockNotice(payload string) bool {
	return payload == redisops.UnlockMessage || payload == redisops.ReadUnlockMessage
}
