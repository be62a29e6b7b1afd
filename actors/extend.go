package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// ErrWatchdogHold is the error of an Extend of a hold that the watchdog renews: such a hold does not
// run out while it is held, and its lease is the watchdog timeout. Only a hold taken with a fixed
// lease can be extended.
var ErrWatchdogHold = errors.New("lockwarden: the hold is renewed by the watchdog; only a hold with a fixed lease can be extended")

// onExtend sets the lease of m's owner's hold of m's kind, a hold with a fixed lease, to m.Lease from
// now: the family's renewal script (redisops.Ops.Renew, WriteRenew, ReadRenew: the owner check and
// PEXPIRE), and then the hold's validity, its deadline and its lease for the releases of inner holds,
// counted from when the call was sent, as a renewal's. The actor waits for Redis on its turn, as for a
// force unlock; the call is bounded by the hold's validity, past which its answer is worthless.
//
// It answers ReasonNotHeld when the owner holds nothing here (never took it, released it, a failed
// last release, lost it, or its validity ran out, also while the call was out; what that late
// extension may have renewed is given back), and ErrWatchdogHold for a watchdog hold. A Redis error,
// or an extension the replicas did not acknowledge (then matching redisops.ErrNotSynced), leaves the
// hold with the validity it had, cut to the new lease's if that is shorter: the master may keep the
// hold for either lease, so a hold that then runs out is given back (the unacked mark).
func (a *lockActor) onExtend(m *Extend) {
	if a.batching() {
		a.flush()
	}
	k := holdKey{m.Owner, m.Kind}
	h := a.holds[k]
	if h != nil && (h.ended() || !time.Now().Before(h.expires)) {
		a.expireHolds()
		h = a.holds[k]
	}
	switch {
	case h == nil || h.retryID != "":
		// A hold whose last release failed counts as released for its holder.
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
		return
	case h.watchdog:
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: ErrWatchdogHold})
		return
	}
	old := h.expires
	sent, err := a.extendOnce(k, h, m.Lease)
	// first is when the first call was sent: when its new lease may have taken effect on the master
	// while the answer says otherwise, a cut of the validity counts from it.
	first := sent
	if errors.Is(err, redisops.ErrReplicasChanged) && !errors.Is(err, redisops.ErrNotHeld) && !h.ended() {
		// The master has fewer replicas than the WAIT asked for (a failover left the new master
		// without the old one's): ask again at once for what it has now, as a renewal does.
		sent, err = a.extendOnce(k, h, m.Lease)
	}
	renewed := err == nil || errors.Is(err, redisops.ErrRenewalNotSynced)
	switch {
	case renewed && (h.ended() || lateGrant(sent, m.Lease) || !time.Now().Before(old)):
		// (Past the old deadline, its timer may be ending the hold as the answer is settled: the
		// hold is taken as ended rather than extended under it.)
		// The hold's validity ran out while the call was out (Done has closed), or the new lease
		// came back with none left.
		a.extensionRanOut(k, h, m)
	case err == nil:
		a.confirmedBy(k, h)
		h.lease = m.Lease
		h.extend(sent, m.Lease)
		h.setReads(h.expires)
		h.unacked = false
		if !time.Now().Before(old) {
			// The old deadline passed while the new one was set: its timer may have fired before
			// the reset, and Done be closing. The hold is lost, and what the master keeps given back.
			a.extensionRanOut(k, h, m)
			return
		}
		m.Ticket.deliver(Outcome{HoldCount: h.count})
		a.emitHold(messages.EventRenewed, k, h, h.count, messages.RenewExtended)
	case errors.Is(err, redisops.ErrNotHeld):
		a.lose(k, "extension found the hold gone")
		a.tryHead()
		m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
	default:
		// Whether the master has the new lease is unknown (a Redis error), or a replica promoted now
		// may keep the former one (not acknowledged): the hold keeps the validity it had, cut to the
		// new lease's when that is shorter, and when it runs out what the master may still keep is
		// given back (expireHolds).
		if h.ended() {
			// The hold ran out while the call was out.
			a.extensionRanOut(k, h, m)
			return
		}
		h.cut(validUntil(first, m.Lease))
		h.unacked = true
		if renewed {
			err = fmt.Errorf("%w: %w", redisops.ErrNotSynced, err)
		}
		m.Ticket.deliver(Outcome{Reason: messages.ReasonRedis, Err: fmt.Errorf("lockwarden: extend: %w", err)})
	}
}

// extensionRanOut answers the extension m of the hold h of k, whose validity ran out while it was
// out: the hold is lost, and what the extension may have renewed on the master is given back, with
// the owner check (an owner id shared with other processes is left to its holder's Unlock, as for a
// late renewal), since nobody owns it.
func (a *lockActor) extensionRanOut(k holdKey, h *hold, m *Extend) {
	a.lose(k, "lease ran out")
	if !h.shared {
		a.giveBackLost(k)
	}
	a.tryHead()
	m.Ticket.deliver(Outcome{Reason: messages.ReasonNotHeld})
}

// extendOnce sends one renewal of the hold h of k with lease, bounded by the hold's validity, and
// returns when it was sent and its error.
func (a *lockActor) extendOnce(k holdKey, h *hold, lease time.Duration) (time.Time, error) {
	sent := time.Now()
	ctx, cancel := a.env.turnContext(h.expires)
	defer cancel()
	return sent, a.proto.renew(ctx, k, lease)
}
