package actors

import (
	"context"
	"time"

	"github.com/lockwarden/lockwarden/redisops"
)

// soloCall is the one call of a reentrant lock that goes to Redis without the actor waiting for it
// (see startCall): the first attempt of an acquisition, or a release. The actor keeps one and reuses
// it for every such call, so that a call costs no allocation of its own: its batch, the goroutine's
// function and the settlement are bound once.
type soloCall struct {
	a     *lockActor
	batch readBatch
	proto strategy
	err   error

	// An acquisition's first attempt: acq, the hold count it checks retries against (held), whether
	// it is a re-entry, and Redis' answer.
	acq     *Acquire
	held    int64
	reentry bool
	res     redisops.Acquired

	// A release: rel, of the hold h (nil when the actor knew of none) of k, its request id and lease,
	// the handoff it asks for (next, to the waiter nextCmd), and Redis' answer; held is then the hold
	// count the release expects, and token the hold's token that checks it (hold.fencedToken).
	token     int64
	rel       *Release
	k         holdKey
	h         *hold
	requestID string
	lease     time.Duration
	next      *redisops.Handoff
	nextCmd   *Acquire
	released  redisops.Released
}

// solo returns the actor's soloCall, made on first use.
func (a *lockActor) solo() *soloCall {
	if a.soloCall == nil {
		s := &soloCall{a: a}
		s.batch = readBatch{solo: true, exec: s.exec, settle: []batchCall{{run: s.settle}}}
		a.soloCall = s
	}
	return a.soloCall
}

// attemptAsync is attempt with the actor not waiting for Redis: afterFirstAttempt runs with what
// attempt would have reported, once Redis answered. reentry is passed on to it.
func (a *lockActor) attemptAsync(m *Acquire, reentry bool) {
	s := a.solo()
	s.acq, s.held, s.reentry = m, a.beginAttempt(m), reentry
	a.startCall(s, m)
}

// releaseAsync sends the release of m's hold h (see onRelease) without the actor waiting for Redis;
// settleRelease runs once Redis answered.
func (a *lockActor) releaseAsync(m *Release, h *hold, requestID string, lease time.Duration, held, token int64, next *redisops.Handoff, nextCmd *Acquire) {
	s := a.solo()
	s.rel, s.k, s.h, s.requestID, s.lease, s.next, s.nextCmd = m, holdKey{m.Owner, m.Kind}, h, requestID, lease, next, nextCmd
	s.held, s.token = held, token
	a.startCall(s, m)
}

// exec runs the call, on the batch's goroutine.
func (s *soloCall) exec(ctx context.Context) {
	if s.acq != nil {
		s.res, s.err = acquireCall(ctx, s.proto, s.acq, s.held, s.a.env.boundCalls())
		return
	}
	s.released, s.err = s.proto.releaseHeld(ctx, s.k, s.requestID, s.lease, s.held, s.token, s.next)
}

// settle takes Redis' answer, on the actor. The call is cleared first: settling may start the next.
func (s *soloCall) settle(sent time.Time) {
	a, err := s.a, s.err
	if s.batch.err != nil {
		err, s.batch.err = s.batch.err, nil // the call panicked: its caller gets that
	}
	if m := s.acq; m != nil {
		res, reentry := s.res, s.reentry
		s.clear()
		acquireEvent(m, sent, res.OK, err)
		ok, ttl, err := a.settleAttempt(m, sent, res, err)
		a.afterFirstAttempt(m, reentry, ok, ttl, err)
		return
	}
	m, h, lease, nextCmd, requestID, rel := s.rel, s.h, s.lease, s.nextCmd, s.requestID, s.released
	s.clear()
	releaseEvent(m.Span, sent, err)
	a.settleRelease(m, h, lease, nextCmd, requestID, sent, rel, err)
}

// clear drops the call's state, and the command and ticket its batch refers to, so that an idle
// (or pooled) actor keeps nothing of its last caller.
func (s *soloCall) clear() {
	a, batch := s.a, s.batch
	batch.settle[0].cmd, batch.carrier = nil, nil
	*s = soloCall{a: a, batch: batch}
}
