package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/messages"
)

// Bounds of the gateway's own work: a status query, and the retries of a release for an owner that
// stopped while Redis failed.
const (
	gatewayStatusTimeout = 5 * time.Second
	ownerReleaseAttempts = 5
	ownerReleaseBackoff  = 100 * time.Millisecond
)

// gateway is the actor behind [Coordinator.PID]: it turns the messages of package messages into
// commands for the lock actors and answers the sender. It never blocks: every command carries a ticket
// whose callback sends the outcome back to the gateway as a message.
//
// Owners that are actors (messages without an explicit Owner) are death-watched for as long as they
// hold or wait for a lock; when one stops, the gateway drops its waits and releases every hold it has.
type gateway struct {
	c    *Coordinator
	self *actor.PID
	root *actor.RootContext

	// owners are the watched owner actors, by owner id.
	owners map[string]*watchedOwner
	// waits are the acquisitions in flight, by ticket.
	waits map[*actors.Ticket]*pendingAcquire
	// releasing are the releases of stopped owners' holds in progress; retry is the timer of a retry
	// after a Redis error, nil while a release is in flight.
	releasing map[ownerHold]*ownerRelease
}

// holdRef names a lock of one kind.
type holdRef struct {
	name string
	kind messages.Kind
}

// ownerHold names one owner's hold of one lock.
type ownerHold struct {
	owner string
	ref   holdRef
}

// watchedOwner is an owner actor the gateway watches, and what it holds or waits for.
type watchedOwner struct {
	pid   *actor.PID
	holds map[holdRef]*gatewayHold
	waits int
}

type gatewayHold struct {
	count int64
	// done closes when the hold ends in the lock actor (released, lost, force-unlocked).
	done <-chan struct{}
}

// pendingAcquire is an acquisition in flight.
type pendingAcquire struct {
	msg    messages.Acquire
	owner  string
	actor  bool // the owner is a watched actor
	sender *actor.PID
	cmd    *actors.Acquire
	timer  *time.Timer
	// ownerGone is set when the owner actor stopped after the outcome was already on its way.
	ownerGone bool
}

type ownerRelease struct {
	released int64
	attempts int
	retry    *time.Timer
}

// The gateway's messages to itself.
type (
	acquireDone struct {
		p *pendingAcquire
		o actors.Outcome
	}
	waitExpired struct{ p *pendingAcquire }
	waitLeft    struct{ p *pendingAcquire }
	releaseDone struct {
		msg    messages.Release
		owner  string
		sender *actor.PID
		o      actors.Outcome
	}
	ownerReleased struct {
		key ownerHold
		o   actors.Outcome
	}
	ownerReleaseRetry struct{ key ownerHold }
)

func (c *Coordinator) gatewayProps() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &gateway{
			c:         c,
			owners:    make(map[string]*watchedOwner),
			waits:     make(map[*actors.Ticket]*pendingAcquire),
			releasing: make(map[ownerHold]*ownerRelease),
		}
	}, actor.WithDispatcher(c.pool), actors.Recover(c.failures, "gateway", ""))
}

// Recovered implements actors.Recoverer: it answers a request whose handling panicked with an
// [messages.Error] matching [ErrActorFailed]; the gateway keeps its state (its watched owners and
// pending requests).
func (g *gateway) Recovered(c actor.ReceiverContext, sender *actor.PID, msg any, err error) {
	ctx, ok := c.(actor.Context)
	if !ok || sender == nil {
		return
	}
	switch msg.(type) {
	case messages.Acquire, *messages.Acquire, messages.Release, *messages.Release,
		messages.ForceUnlock, *messages.ForceUnlock, messages.Status, *messages.Status,
		messages.Primitive, *messages.Primitive:
		g.reply(ctx, sender, &messages.Error{Request: msg, Err: err})
	}
}

// Receive implements actor.Actor.
func (g *gateway) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.self, g.root = ctx.Self(), ctx.ActorSystem().Root
	case *actor.Stopping:
		g.stop(ctx)
	case *actor.Stopped, *actor.Restarting, actor.AutoReceiveMessage:
	case *actor.Terminated:
		g.onTerminated(m.Who)
	case messages.Acquire, *messages.Acquire, messages.Release, *messages.Release,
		messages.ForceUnlock, *messages.ForceUnlock, messages.Status, *messages.Status,
		messages.Primitive, *messages.Primitive:
		if ctx.Sender() == nil {
			// Sent with Send: nobody would learn the outcome, and a lock taken for nobody would leak.
			g.c.opts.logger.Warn("lockwarden: gateway message dropped: it has no sender to reply to; send it with Request",
				"message", fmt.Sprintf("%T", m))
			return
		}
		g.onRequest(ctx, m)
	case acquireDone:
		g.onAcquireDone(ctx, m.p, m.o)
	case waitExpired:
		g.onWaitExpired(m.p)
	case waitLeft:
		g.onWaitLeft(ctx, m.p)
	case releaseDone:
		g.onReleaseDone(ctx, m)
	case ownerReleased:
		g.onOwnerReleased(m.key, m.o)
	case ownerReleaseRetry:
		if r := g.releasing[m.key]; r != nil && r.retry != nil {
			r.retry = nil
			g.sendOwnerRelease(m.key)
		}
	default:
		if _, system := m.(actor.SystemMessage); system {
			return
		}
		g.reply(ctx, ctx.Sender(), badMessage(m))
	}
}

// onRequest dispatches a message of the API, given as a value or a pointer.
func (g *gateway) onRequest(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case messages.Acquire:
		g.onAcquire(ctx, m)
	case *messages.Acquire:
		onPointer(g, ctx, m, g.onAcquire)
	case messages.Release:
		g.onRelease(ctx, m)
	case *messages.Release:
		onPointer(g, ctx, m, g.onRelease)
	case messages.ForceUnlock:
		g.onForceUnlock(ctx, m)
	case *messages.ForceUnlock:
		onPointer(g, ctx, m, g.onForceUnlock)
	case messages.Primitive:
		g.onPrimitive(ctx, m)
	case *messages.Primitive:
		onPointer(g, ctx, m, g.onPrimitive)
	case messages.Status:
		g.onStatus(ctx, m)
	case *messages.Status:
		onPointer(g, ctx, m, g.onStatus)
	}
}

// onPointer hands the message m, given as a pointer, to its handler on; a nil pointer is answered
// with ErrInvalidMessage.
func onPointer[T any](g *gateway, ctx actor.Context, m *T, on func(actor.Context, T)) {
	if m == nil {
		g.reply(ctx, ctx.Sender(), badMessage(m))
		return
	}
	on(ctx, *m)
}

func badMessage(m any) *messages.Error {
	return &messages.Error{Request: m, Err: fmt.Errorf("%w: %T", ErrInvalidMessage, m)}
}

// reply sends msg to the requester; a message that came without a sender cannot be answered.
func (g *gateway) reply(ctx actor.Context, to *actor.PID, msg any) {
	if to == nil {
		g.c.opts.logger.Warn("lockwarden: a message to the gateway had no sender to reply to; use Request",
			"reply", fmt.Sprintf("%T", msg))
		return
	}
	ctx.Send(to, msg)
}

// validate checks what every message has: a name and a known kind.
func validate(name string, kind messages.Kind) error {
	if name == "" {
		return ErrEmptyName
	}
	if _, ok := actorKind(kind); !ok {
		return fmt.Errorf("%w: %d", ErrInvalidKind, kind)
	}
	return nil
}

// actorKind is the lock actors' kind of k (the same enum), and whether it is a registered one.
func actorKind(k messages.Kind) (actors.Kind, bool) { return k, actors.KnownKind(k) }

// isActor reports whether pid is an actor that can own locks: not nil, and not the one-shot process
// of a future (protoactor names those "future$..."), which would end its holds as soon as it had its
// answer, and which a Watch would complete.
func isActor(pid *actor.PID) bool {
	return pid != nil && !strings.HasPrefix(pid.Id, "future$")
}

// actorOwner returns the owner id of the actor pid: "<coordinator id>:<address>/<id>". It is stable for
// the actor's lifetime and, since it starts with the coordinator's id, differs from the ids that other
// coordinators give the same PID.
func (g *gateway) actorOwner(pid *actor.PID) string {
	return g.c.id + ":" + pid.Address + "/" + pid.Id
}

// owner resolves the owner of a message: the explicit id, else the sender actor. It reports whether
// the owner is the sender actor.
func (g *gateway) owner(explicit string, sender *actor.PID) (string, bool, error) {
	if explicit != "" {
		return explicit, false, nil
	}
	if !isActor(sender) {
		return "", false, ErrNoOwner
	}
	return g.actorOwner(sender), true, nil
}

// watch returns the state of the owner actor pid, and starts watching it if it was not yet.
func (g *gateway) watch(ctx actor.Context, owner string, pid *actor.PID) *watchedOwner {
	w := g.owners[owner]
	if w == nil {
		w = &watchedOwner{pid: pid, holds: make(map[holdRef]*gatewayHold)}
		g.owners[owner] = w
		ctx.Watch(pid)
	}
	return w
}

// settle forgets the holds of owner that ended on their own (a lease ran out, a force unlock), and
// stops watching owner when it holds and waits for nothing any more.
func (g *gateway) settle(ctx actor.Context, owner string) {
	w := g.owners[owner]
	if w == nil {
		return
	}
	for ref, h := range w.holds {
		if isClosedChan(h.done) {
			delete(w.holds, ref)
		}
	}
	if len(w.holds) == 0 && w.waits == 0 {
		delete(g.owners, owner)
		ctx.Unwatch(w.pid)
	}
}

func (g *gateway) onAcquire(ctx actor.Context, m messages.Acquire) {
	sender := ctx.Sender()
	fail := func(err error) {
		g.reply(ctx, sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: err})
	}
	if err := validate(m.Name, m.Kind); err != nil {
		fail(err)
		return
	}
	if m.Wait < 0 || (m.Wait > MaxDuration && m.Wait != messages.WaitForever) {
		fail(fmt.Errorf("%w: wait %v is negative or above %v (0 makes one attempt, messages.WaitForever waits until obtained)", ErrInvalidWait, m.Wait, MaxDuration))
		return
	}
	if m.Lease < 0 || (m.Lease > 0 && m.Lease < MinLease) || m.Lease > MaxDuration {
		fail(fmt.Errorf("%w: lease %v is outside [%v, %v] (0 takes a watchdog hold)", ErrInvalidLease, m.Lease, MinLease, MaxDuration))
		return
	}
	owner, isActorOwner, err := g.owner(m.Owner, sender)
	if err != nil {
		fail(err)
		return
	}
	if g.c.isClosed() {
		fail(ErrClosed)
		return
	}
	kind, _ := actorKind(m.Kind)
	handle := g.c.handle(kind, m.Name, mutexOptions{owner: owner, shared: !isActorOwner}, nil)
	// A bounded wait is also a fair waiter's window in the Redis queue, as for TryLock with Wait.
	var window time.Duration
	bounded := m.Wait > 0 && m.Wait != messages.WaitForever
	if bounded {
		window = m.Wait
	}
	p := &pendingAcquire{msg: m, owner: owner, actor: isActorOwner, sender: sender}
	self, root := g.self, g.root
	p.cmd = handle.acquireCommand(new(actors.Acquire), m.Lease, m.Wait > 0, window, actors.NewTicketFunc(func(o actors.Outcome) {
		root.Send(self, acquireDone{p: p, o: o})
	}))
	if isActorOwner {
		g.watch(ctx, owner, sender).waits++
	}
	g.waits[p.cmd.Ticket] = p
	if bounded {
		p.timer = time.AfterFunc(m.Wait, func() { root.Send(self, waitExpired{p}) })
	}
	ctx.Send(g.c.guardian, p.cmd)
}

// done forgets the acquisition p: it is answered or given up.
func (g *gateway) done(p *pendingAcquire) {
	delete(g.waits, p.cmd.Ticket)
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if w := g.owners[p.owner]; p.actor && w != nil {
		w.waits--
	}
}

func (g *gateway) onAcquireDone(ctx actor.Context, p *pendingAcquire, o actors.Outcome) {
	if g.waits[p.cmd.Ticket] != p {
		return
	}
	g.done(p)
	m := p.msg
	ref := holdRef{m.Name, m.Kind}
	if p.ownerGone {
		// The owner stopped while the lock was being granted to it.
		if o.Reason == messages.ReasonNone {
			g.releaseForStoppedOwner(ownerHold{p.owner, ref})
		}
		return
	}
	switch o.Reason {
	case messages.ReasonNone:
		if w := g.owners[p.owner]; p.actor && w != nil {
			w.holds[ref] = &gatewayHold{count: o.HoldCount, done: o.Done}
		}
		lease, watchdog := p.cmd.Lease, p.cmd.Watchdog
		g.reply(ctx, p.sender, &messages.Acquired{
			Name: m.Name, Kind: m.Kind, Owner: p.owner, Token: o.Token, Lease: lease, Watchdog: watchdog,
			HoldCount: o.HoldCount,
		})
	case messages.ReasonNotObtained, messages.ReasonUpgrade:
		g.reply(ctx, p.sender, &messages.NotObtained{Name: m.Name, Kind: m.Kind, Owner: p.owner, Reason: o.Reason})
	default:
		g.reply(ctx, p.sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: outcomeErr(o)})
	}
	g.settle(ctx, p.owner)
}

// outcomeErr is outcomeError for outcomes that are failures, with Redis errors wrapped.
func outcomeErr(o actors.Outcome) error {
	err := outcomeError(o)
	if err == nil {
		return errors.New("lockwarden: unknown failure")
	}
	return err
}

func (g *gateway) onWaitExpired(p *pendingAcquire) {
	if g.waits[p.cmd.Ticket] != p || p.timer == nil {
		return
	}
	p.timer = nil
	if !p.cmd.Ticket.Abandon() {
		return // the outcome is on its way
	}
	// Answer once the waiter has left the lock actor's queue (and a fair lock's Redis queue, or a
	// writer's intent), so that an attempt right after the answer finds no trace of it.
	self, root := g.self, g.root
	g.root.Send(g.c.guardian, &actors.Abandon{
		Name: p.cmd.Name, Kind: p.cmd.Kind, Ticket: p.cmd.Ticket,
		Ack: actors.NewTicketFunc(func(actors.Outcome) { root.Send(self, waitLeft{p}) }),
	})
}

func (g *gateway) onWaitLeft(ctx actor.Context, p *pendingAcquire) {
	if g.waits[p.cmd.Ticket] != p {
		return
	}
	g.done(p)
	if !p.ownerGone {
		g.reply(ctx, p.sender, &messages.NotObtained{
			Name: p.msg.Name, Kind: p.msg.Kind, Owner: p.owner, Reason: messages.ReasonNotObtained,
		})
	}
	g.settle(ctx, p.owner)
}

func (g *gateway) onRelease(ctx actor.Context, m messages.Release) {
	sender := ctx.Sender()
	fail := func(err error) {
		g.reply(ctx, sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: err})
	}
	if err := validate(m.Name, m.Kind); err != nil {
		fail(err)
		return
	}
	owner, _, err := g.owner(m.Owner, sender)
	if err != nil {
		fail(err)
		return
	}
	if g.c.isClosed() {
		fail(ErrClosed)
		return
	}
	kind, _ := actorKind(m.Kind)
	self, root := g.self, g.root
	ctx.Send(g.c.guardian, &actors.Release{Name: m.Name, Kind: kind, Owner: owner, Ticket: actors.NewTicketFunc(func(o actors.Outcome) {
		root.Send(self, releaseDone{msg: m, owner: owner, sender: sender, o: o})
	})})
}

func (g *gateway) onReleaseDone(ctx actor.Context, d releaseDone) {
	m := d.msg
	ref := holdRef{m.Name, m.Kind}
	w := g.owners[d.owner]
	switch d.o.Reason {
	case messages.ReasonNone:
		if w != nil {
			if h := w.holds[ref]; h != nil {
				h.count = d.o.HoldCount
				if h.count == 0 {
					delete(w.holds, ref)
				}
			}
		}
		g.reply(ctx, d.sender, &messages.Released{Name: m.Name, Kind: m.Kind, Owner: d.owner, HoldCount: d.o.HoldCount})
	case messages.ReasonNotHeld:
		if w != nil {
			delete(w.holds, ref)
		}
		g.reply(ctx, d.sender, &messages.NotHeld{Name: m.Name, Kind: m.Kind, Owner: d.owner})
	default:
		g.reply(ctx, d.sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: outcomeErr(d.o)})
	}
	g.settle(ctx, d.owner)
}

func (g *gateway) onForceUnlock(ctx actor.Context, m messages.ForceUnlock) {
	sender := ctx.Sender()
	fail := func(err error) {
		g.reply(ctx, sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: err})
	}
	if err := validate(m.Name, m.Kind); err != nil {
		fail(err)
		return
	}
	if g.c.isClosed() {
		fail(ErrClosed)
		return
	}
	kind, _ := actorKind(m.Kind)
	root := g.root
	ctx.Send(g.c.guardian, &actors.ForceUnlock{Name: m.Name, Kind: kind, Ticket: actors.NewTicketFunc(func(o actors.Outcome) {
		if o.Reason != messages.ReasonNone {
			root.Send(sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: outcomeErr(o)})
			return
		}
		root.Send(sender, &messages.ForceUnlocked{Name: m.Name, Kind: m.Kind, Deleted: o.Deleted})
	})})
}

func (g *gateway) onStatus(ctx actor.Context, m messages.Status) {
	sender := ctx.Sender()
	fail := func(err error) {
		g.reply(ctx, sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: err})
	}
	if err := validate(m.Name, m.Kind); err != nil {
		fail(err)
		return
	}
	if g.c.isClosed() {
		fail(ErrClosed)
		return
	}
	// Without an owner, and no actor to stand for one, the status has no hold count to report.
	owner, _, _ := g.owner(m.Owner, sender)
	kind, _ := actorKind(m.Kind)
	c, root := g.c, g.root
	// A status is one Redis round trip that no lock actor serialises; it runs on a goroutine of its
	// own so that the gateway never waits on Redis. Close waits for it.
	c.background.Add(1)
	go func() {
		defer c.background.Done()
		// Bounded by the stop release timeout too: Close waits for the query (see Close).
		callCtx, cancel := context.WithTimeout(c.lifetime, min(gatewayStatusTimeout, c.opts.stopReleaseTimeout))
		defer cancel()
		s, err := c.status(callCtx, kind, m.Name, owner)
		if err != nil {
			if c.isClosed() {
				err = ErrClosed
			}
			root.Send(sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: fmt.Errorf("lockwarden: status: %w", err)})
			return
		}
		ttl := max(s.TTL, 0)
		root.Send(sender, &messages.StatusReply{
			Name: m.Name, Kind: m.Kind, Owner: owner, Locked: s.Locked, Held: s.HoldCount > 0,
			HoldCount: s.HoldCount, TTL: ttl,
		})
	}()
}

// onTerminated drops the waits of an owner actor that stopped and releases every hold it has.
func (g *gateway) onTerminated(who *actor.PID) {
	owner := g.actorOwner(who)
	w := g.owners[owner]
	if w == nil {
		return
	}
	delete(g.owners, owner)
	for _, p := range g.waits {
		if p.owner != owner || !p.actor {
			continue
		}
		p.ownerGone = true
		if p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
		if p.cmd.Ticket.Abandon() {
			// The lock actor takes the waiter out of its queue, and undoes what it obtains for it.
			delete(g.waits, p.cmd.Ticket)
			g.root.Send(g.c.guardian, &actors.Abandon{Name: p.cmd.Name, Kind: p.cmd.Kind, Ticket: p.cmd.Ticket})
		}
		// Otherwise the outcome is on its way, and onAcquireDone releases what it grants.
	}
	for ref := range w.holds {
		g.releaseForStoppedOwner(ownerHold{owner, ref})
	}
}

// releaseForStoppedOwner releases every hold of one lock by an owner actor that stopped, one release
// after the other until none is left.
func (g *gateway) releaseForStoppedOwner(key ownerHold) {
	if g.releasing[key] != nil {
		return // a release in progress goes on until no hold is left
	}
	g.releasing[key] = &ownerRelease{}
	g.sendOwnerRelease(key)
}

func (g *gateway) sendOwnerRelease(key ownerHold) {
	kind, _ := actorKind(key.ref.kind)
	self, root := g.self, g.root
	g.root.Send(g.c.guardian, &actors.Release{
		Name: key.ref.name, Kind: kind, Owner: key.owner, Reason: messages.ReleaseCauseOwnerStopped,
		Ticket: actors.NewTicketFunc(func(o actors.Outcome) { root.Send(self, ownerReleased{key: key, o: o}) }),
	})
}

func (g *gateway) onOwnerReleased(key ownerHold, o actors.Outcome) {
	r := g.releasing[key]
	if r == nil {
		return
	}
	switch o.Reason {
	case messages.ReasonNone:
		r.released++
		if o.HoldCount > 0 {
			g.sendOwnerRelease(key)
			return
		}
	case messages.ReasonNotHeld, messages.ReasonClosed:
	default:
		r.attempts++
		if r.attempts < ownerReleaseAttempts && !g.c.isClosed() {
			self, root := g.self, g.root
			r.retry = time.AfterFunc(time.Duration(r.attempts)*ownerReleaseBackoff, func() {
				root.Send(self, ownerReleaseRetry{key})
			})
			return
		}
		g.c.opts.logger.Error("lockwarden: release of a stopped owner's hold failed; it lasts until its lease runs out",
			"lock", key.ref.name, "kind", key.ref.kind.String(), "owner", key.owner, "err", outcomeErr(o))
	}
	delete(g.releasing, key)
	if r.released > 0 {
		g.releasedOwnerStopped(key, r.released)
	}
}

// releasedOwnerStopped reports that the coordinator released holds of the lock key.ref (holds of them,
// every one the owner had) because the owner actor key.owner stopped. It logs the release with the
// cause [messages.ReleaseCauseOwnerStopped]; the lock actor publishes a Released event with that
// Reason for each of these releases.
func (g *gateway) releasedOwnerStopped(key ownerHold, holds int64) {
	g.c.opts.logger.Info("lockwarden: lock released",
		"cause", messages.ReleaseCauseOwnerStopped, "lock", key.ref.name, "kind", key.ref.kind.String(),
		"owner", key.owner, "holds", holds)
}

// stop runs when the coordinator closes: requests still waiting get ErrClosed, watches and timers end.
// The lock actors release the holds themselves as they stop.
func (g *gateway) stop(ctx actor.Context) {
	for _, p := range g.waits {
		if p.timer != nil {
			p.timer.Stop()
		}
		// Answered or not by the lock actor, the reply would come as a message this stopped actor
		// never reads: answer ErrClosed now (the lock actors release every hold as they stop).
		p.cmd.Ticket.Abandon()
		if !p.ownerGone {
			m := p.msg
			g.reply(ctx, p.sender, &messages.Error{Name: m.Name, Kind: m.Kind, Request: &m, Err: ErrClosed})
		}
	}
	clear(g.waits)
	for _, r := range g.releasing {
		if r.retry != nil {
			r.retry.Stop()
		}
	}
	clear(g.releasing)
	for _, w := range g.owners {
		ctx.Unwatch(w.pid)
	}
	clear(g.owners)
}
