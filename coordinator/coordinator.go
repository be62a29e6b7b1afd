package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/redisops"
	"github.com/lockwarden/lockwarden/telemetry"
)

// Coordinator is the entry point to lockwarden: it owns an actor system (or, with [WithActorSystem],
// actors in the application's system) with one actor per lock name in use, a gateway actor for the
// actor message API ([Coordinator.PID]), and one pub/sub connection for unlock notices. It is safe for
// concurrent use. Create it with [New] and release it with [Coordinator.Close].
type Coordinator struct {
	id     string
	opts   options
	ops    *redisops.Ops
	owners atomic.Uint64
	// requests numbers release requests, whose ids must be unique for the retry latch.
	requests atomic.Uint64
	pool     *actors.WorkerPool
	// renewals sends the watchdog renewals of every lock actor together.
	renewals *actors.Renewals
	events   *eventHub
	tel      *telemetry.Telemetry

	system *actor.ActorSystem
	// ownSystem is whether system was created by New (and is shut down by Close), rather than given
	// with WithActorSystem.
	ownSystem bool
	bridge    *actor.PID
	guardian  *actor.PID
	// gateway answers the messages of the actor message API.
	gateway *actor.PID
	// client is the client the coordinator was made with; started is when.
	client  redis.UniversalClient
	started time.Time
	// held records what the coordinator's owners hold and ask for, across its lock actors.
	held *actors.HeldKinds
	// registry runs the process registration (see registerProcess); actorsStopped is closed at Close
	// once the lock actors have stopped, after which the registration is deleted.
	registry      sync.WaitGroup
	actorsStopped chan struct{}
	// background counts the gateway's status queries running on their own goroutines.
	background sync.WaitGroup

	// failures is where the actors report a recovered panic.
	failures *actors.Failures
	// stop is the deadline that all the work of Close shares; it starts with Close.
	stop *actors.StopClock
	// lifetime bounds every Redis call of the actors; it ends when Close starts.
	lifetime context.Context
	cancel   context.CancelFunc

	closeOnce sync.Once
	closed    chan struct{}

	// groups are the supervisors of live Group handles, stopped at Close before the lock actors.
	groupsMu sync.Mutex
	groups   map[*actor.PID]struct{}
	// stopping counts the stops of garbage-collected groups still running, and the RedLock node
	// checks in flight.
	stopping sync.WaitGroup
	// runs is the run id of the Redis server, as RedLock groups last saw it.
	runs nodeRuns
}

// New returns a Coordinator for the Redis deployment behind client: a single server (a
// *redis.Client), a master behind Sentinel (the *redis.Client of redis.NewFailoverClient) or a Redis
// Cluster (a *redis.ClusterClient); redis.NewUniversalClient returns one of these. The deployment is
// told from the client's type, once. The coordinator does not close client.
//
// It returns [ErrNilClient] for a nil client, [ErrUnsupportedClient] for a *redis.Ring or any other
// type of client, and [ErrInvalidOption] for an invalid option.
func New(client redis.UniversalClient, opts ...Option) (*Coordinator, error) {
	if isNil(client) {
		return nil, ErrNilClient
	}
	deployment, err := redisops.DeploymentOf(client)
	if err != nil {
		return nil, err
	}
	o := defaultOptions()
	if err := applyOptions(&o, opts); err != nil {
		return nil, err
	}
	// The telemetry is made first: when it fails, nothing has been started that would need stopping.
	var tel *telemetry.Telemetry
	if !o.noTelemetry {
		if tel, err = telemetry.New(o.telemetry); err != nil {
			return nil, fmt.Errorf("lockwarden: telemetry: %w", err)
		}
	}
	system, ownSystem := o.system, false
	if system == nil {
		discard := slog.New(slog.DiscardHandler)
		system, ownSystem = actor.NewActorSystem(
			actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return discard }),
			actor.WithDeadLetterRequestLogging(false),
			// A short throttle period keeps protoactor's dead-letter throttle goroutine short-lived.
			actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
		), true
	}
	lifetime, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		id:        uuid.NewString(),
		client:    client,
		started:   time.Now(),
		opts:      o,
		ops:       newOps(client, deployment, o),
		system:    system,
		ownSystem: ownSystem,
		lifetime:  lifetime,
		cancel:    cancel,
		closed:    make(chan struct{}),
		groups:    make(map[*actor.PID]struct{}),
		stop:      actors.NewStopClock(o.stopReleaseTimeout),
		tel:       tel,
		held:      &actors.HeldKinds{},

		actorsStopped: make(chan struct{}),
	}
	var journal *eventJournal
	if o.journalStream != "" {
		journal = newEventJournal(client, o.journalStream, o.journalMaxLen, c.stop, o.logger)
	}
	base := int32(0)
	if c.ownSystem {
		base = system.EventStream.Length()
	}
	c.events = newEventHub(system.EventStream, base, journal, c.stop)
	c.failures = &actors.Failures{Logger: o.logger, Events: eventSink{hub: c.events}, CoordinatorID: c.id, Inject: o.inject}
	workers := o.workers
	if workers == 0 {
		workers = workerPoolSize()
	}
	c.pool = actors.NewWorkerPool(workers, 300)
	c.renewals = actors.NewRenewals(c.ops, lifetime, renewalLinger(o.watchdogTimeout), o.stopReleaseTimeout)
	c.bridge = system.Root.Spawn(actors.NewBridgeProps(client, deployment, lifetime, o.logger, c.stop, c.failures))
	c.guardian = system.Root.Spawn(actors.NewGuardianProps(&actors.Env{
		Ops:                c.ops,
		Events:             eventSink{tel: c.tel, hub: c.events},
		Telemetry:          c.tel,
		CoordinatorID:      c.id,
		Bridge:             c.bridge,
		WatchdogTimeout:    o.watchdogTimeout,
		IdleTimeout:        o.idleTimeout,
		MaxHandoffs:        o.maxHandoffs,
		EarlyGrantWindow:   o.earlyHandoffWindow,
		StopReleaseTimeout: o.stopReleaseTimeout,
		Stop:               c.stop,
		Failures:           c.failures,
		Context:            lifetime,
		Logger:             o.logger,
		NewBackOff:         actors.DefaultBackOff,
		Held:               c.held,
		Dispatcher:         c.pool,
		Renewals:           c.renewals,
		NewRequestID:       c.newRequestID,
	}))
	c.gateway = system.Root.Spawn(c.gatewayProps())
	if !o.noProcessRegistry {
		c.registry.Add(1)
		go c.registerProcess()
	}
	return c, nil
}

// PID returns the PID of the coordinator's gateway: the actor that answers the messages of package
// messages ([messages.Acquire], [messages.Release], [messages.ForceUnlock], [messages.Status]). Send
// them with Request from an actor (or RequestFuture); the reply goes to the sender. See the package
// documentation, "Actor message API". After Close the gateway is stopped, and protoactor answers
// requests to it as dead letters.
func (c *Coordinator) PID() *actor.PID { return c.gateway }

// ActorSystem returns the actor system the coordinator's actors run in: the one given with
// [WithActorSystem], or else the coordinator's own. Only actors of this system (or of systems connected
// to it by protoactor's remoting) can reach [Coordinator.PID]. Lock events are published on its
// EventStream (see [Coordinator.Subscribe]). Do not shut the coordinator's own system down: Close does.
func (c *Coordinator) ActorSystem() *actor.ActorSystem { return c.system }

// workerPoolSize is the default number of warm goroutines that run the actors (see WithWorkers):
// enough for every core to be busy while many lock actors wait on Redis.
func workerPoolSize() int { return 16 * runtime.GOMAXPROCS(0) }

// isNil reports whether client is nil, including a typed nil pointer in the interface.
func isNil(client redis.UniversalClient) bool {
	if client == nil {
		return true
	}
	v := reflect.ValueOf(client)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// ID returns the coordinator's UUID, the first part of the owner ids it creates.
func (c *Coordinator) ID() string { return c.id }

// Close stops every actor, timer and goroutine of the coordinator and waits for them. It is idempotent
// and always returns nil. An actor system given with [WithActorSystem] keeps running: Close stops only
// the actors the coordinator spawned in it.
//
// Locks still held through the coordinator are released on a best-effort basis; their Done channels
// close. A lock whose release fails (Redis unreachable) stays in Redis until its lease runs out, which
// for a watchdog lock is at most the watchdog timeout, since nothing renews it any more. Calls still
// waiting return [ErrClosed], and every later call on the coordinator or its handles returns
// [ErrClosed].
//
// All the work Close does against Redis (releasing holds, fair waiters leaving their queues, group
// members releasing, the pub/sub connections closing, the event journal writing what is queued; and,
// not against Redis, the actor system's EventStream getting the events still queued for it) shares
// one deadline: [WithStopReleaseTimeout] from the moment Close is called. So when Redis is unreachable,
// Close returns within about the stop release timeout, unless an acquisition attempt that an actor
// waits for on its turn is in flight (see below). A Redis call that a lock actor sent without
// waiting for it (a Mutex's first attempt or release, a read-write lock's reads), still unanswered at
// the deadline in a stalled connection, no longer holds Close (go-redis ends a blocked read at its
// context's deadline, not when the context is cancelled): its caller gets [ErrClosed], unless it runs
// the call itself (a ctx that never ends: it returns when the client gives up on the call), and the
// goroutine making it ends when the client does (its ReadTimeout, or the client's Close). Every other
// Redis call (those an actor waits for on its turn: a fair or write lock's releases, a queue leave,
// [Mutex.ForceUnlock], an Extend, a semaphore's or latch's calls; the renewals; and the coordinator's
// own: the process registry, the actor API's status queries) is bounded by the stop release timeout,
// besides its own bound, so that none holds Close longer; but an acquisition attempt an actor waits
// for (a waiter's, a fair or write lock's) is bounded by its lease only, since one cut off sooner may
// leave a grant nobody holds until the lease ends: Close waits for it.
// The pub/sub connections that are still closing at the deadline (a reconnect stuck in a network
// partition) finish closing in the background.
//
// go-redis applies context deadlines to network reads only when the client has ContextTimeoutEnabled
// set; without it, a call to an unreachable Redis blocks for the client's ReadTimeout, and Close may
// take that long on top of the stop release timeout. Set ContextTimeoutEnabled for a bounded Close.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		c.stop.Start()
		close(c.closed)
		// Abort Redis calls in flight, so no actor is stuck behind a dead connection; the releases
		// at stop use their own deadline.
		c.cancel()
		// The gateway first: it answers its waiting requests with ErrClosed and stops sending
		// commands to the lock actors.
		_ = c.system.Root.StopFuture(c.gateway).Wait()
		c.background.Wait()
		c.stopGroups()
		c.stopping.Wait()
		_ = c.system.Root.StopFuture(c.guardian).Wait()
		close(c.actorsStopped)
		c.registry.Wait()
		c.renewals.Wait()
		_ = c.system.Root.StopFuture(c.bridge).Wait()
		c.events.close()
		c.tel.Close()
		if !c.pool.StopBy(c.stop.Deadline()) {
			c.failures.Logger.Warn("Redis calls given up on at the stop deadline are still under way; they end when the client gives up on them")
		}
		if c.ownSystem {
			c.system.Shutdown()
		}
	})
	return nil
}

// spawnGroup starts a group supervisor, unless the coordinator is closed.
func (c *Coordinator) spawnGroup(props *actor.Props) (*actor.PID, bool) {
	c.groupsMu.Lock()
	defer c.groupsMu.Unlock()
	if c.isClosed() {
		return nil, false
	}
	pid := c.system.Root.Spawn(props)
	c.groups[pid] = struct{}{}
	return pid, true
}

// stopGroup stops the supervisor of a Group that was garbage collected; it releases what the group held.
func (c *Coordinator) stopGroup(pid *actor.PID) {
	c.groupsMu.Lock()
	defer c.groupsMu.Unlock()
	if _, ok := c.groups[pid]; ok && !c.isClosed() {
		delete(c.groups, pid)
		// The supervisor runs inline on the sender and its members release what they hold as they
		// stop: not on the runtime's cleanup goroutine, which must not block.
		c.stopping.Add(1)
		go func() {
			defer c.stopping.Done()
			c.closeGroup(pid)
		}()
	}
}

// stopGroups stops every group supervisor and waits for them; they release the members they hold
// (those on other coordinators, since this one's lock actors release their own holds next).
func (c *Coordinator) stopGroups() {
	c.groupsMu.Lock()
	pids := make([]*actor.PID, 0, len(c.groups))
	for pid := range c.groups {
		pids = append(pids, pid)
	}
	clear(c.groups)
	c.groupsMu.Unlock()
	var wg sync.WaitGroup
	for _, pid := range pids {
		wg.Go(func() { c.closeGroup(pid) })
	}
	wg.Wait()
}

// closeGroup shuts the supervisor pid down: it answers its callers, its members release what they hold
// (for at most the stop release timeout), and then it stops. The actors never block on the way: they
// may run on the goroutines of the lock actors they release.
func (c *Coordinator) closeGroup(pid *actor.PID) {
	done := make(chan struct{})
	c.system.Root.Send(pid, &actors.GroupClose{Done: done})
	timer := time.NewTimer(time.Until(c.stop.Deadline()))
	select {
	case <-done:
	case <-timer.C:
		c.opts.logger.Warn("group members still releasing at the stop deadline")
	}
	timer.Stop()
	_ = c.system.Root.StopFuture(pid).Wait()
}

func (c *Coordinator) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// newRequestID returns a request id unique for the coordinator's lifetime, "<id>:r<n>", built in one
// allocation (see actors.Env.NewRequestID).
func (c *Coordinator) newRequestID() string {
	var digits [20]byte
	n := strconv.AppendUint(digits[:0], c.requests.Add(1), 10)
	var b strings.Builder
	b.Grow(len(c.id) + 2 + len(n))
	b.WriteString(c.id)
	b.WriteString(":r")
	b.Write(n)
	return b.String()
}

func (c *Coordinator) newOwner() string {
	return c.id + ":" + strconv.FormatUint(c.owners.Add(1), 10)
}

// errAbandoned tells callers of doRouted that they gave up, because ctx ended or the coordinator closed.
// ack is delivered once the actor has taken the abandoned command out of its queue (nil when the
// coordinator closed).
type errAbandoned struct {
	err error
	ack *actors.Ticket
}

func (e errAbandoned) Error() string { return e.err.Error() }
func (e errAbandoned) Unwrap() error { return e.err }

// doRouted sends cmd to its actor and waits for the outcome on ticket. If ctx ends or the coordinator
// closes first, it abandons the ticket and returns errAbandoned; abandonment is undone by the actor.
//
// The handle keeps the route of its actor in route (see actors.Route): while
// the route stands, cmd is sent to the actor directly, with no turn of the guardian, which every
// handle's commands would otherwise share; when there is none yet, or it was retired (the actor went
// idle and was unbound), the guardian is asked for the actor (actors.Locate) and route keeps its
// answer. Either way the actor runs cmd outside the guardian's turn, on this goroutine when it may.
func (c *Coordinator) doRouted(ctx context.Context, route *atomic.Pointer[actors.Route], cmd actors.Routed, ticket *actors.Ticket) (actors.Outcome, error) {
	if r := route.Load(); r != nil {
		if pid, ok := r.Enter(); ok {
			return c.doAt(ctx, pid, cmd, ticket)
		}
	}
	loc := actors.NewLocate(cmd)
	c.system.Root.Send(c.guardian, loc)
	// The guardian counts cmd as sent to the actor, which is recycled only once it has received it:
	// it must be sent, even if ctx ends meanwhile (it is then abandoned, as any command). The guardian
	// never waits, so the answer comes at once; when it ran on this goroutine, it is here already, and
	// no channel of the ticket is made to wait for it.
	select {
	case <-loc.Located():
	default:
		if o, answered, err := c.awaitLocated(loc, ticket); answered {
			return o, err
		}
	}
	route.Store(loc.Route())
	return c.doAt(ctx, loc.PID(), cmd, ticket)
}

// awaitLocated waits for the guardian's answer to loc, and reports answered false once it has come.
// It reports answered true, with what doRouted returns, when the guardian failed on the Locate and
// answered the command itself on ticket (ErrActorFailed), or when the coordinator closed.
func (c *Coordinator) awaitLocated(loc *actors.Locate, ticket *actors.Ticket) (o actors.Outcome, answered bool, err error) {
	select {
	case <-loc.Located():
		return o, false, nil
	case <-ticket.Ready():
		return ticket.Outcome(), true, nil
	case <-c.closed:
		return o, true, errAbandoned{err: ErrClosed}
	}
}

// doAt is doRouted with cmd sent to pid, the actor that serves it.
func (c *Coordinator) doAt(ctx context.Context, pid *actor.PID, cmd actors.Routed, ticket *actors.Ticket) (actors.Outcome, error) {
	o, err := c.ask(ctx, pid, cmd, ticket)
	if err == nil {
		return o, nil
	}
	if c.isClosed() {
		return actors.Outcome{}, errAbandoned{err: err}
	}
	ack := actors.NewTicket()
	c.system.Root.Send(c.guardian, &actors.Abandon{Name: cmd.LockName(), Kind: cmd.LockKind(), Ticket: ticket, Ack: ack})
	return actors.Outcome{}, errAbandoned{err: err, ack: ack}
}

// ask sends msg to pid and waits for the outcome on ticket. If ctx ends or the coordinator closes
// first, it abandons the ticket and returns ctx.Err() or ErrClosed; the actor sees the abandoned ticket
// and undoes what it obtained for it.
func (c *Coordinator) ask(ctx context.Context, pid *actor.PID, msg any, ticket *actors.Ticket) (actors.Outcome, error) {
	if ctx.Done() == nil {
		// A caller that cannot give up runs the Redis call of its command itself, when the lock
		// actor takes the command while the post is under way (on this goroutine, when the actor is
		// idle) and hands the call over: no other goroutine is woken to run the call, nor this one
		// to read the answer.
		ticket.OpenCarry()
		c.system.Root.Send(pid, msg)
		if run := ticket.CloseCarry(); run != nil {
			run()
		}
	} else {
		c.system.Root.Send(pid, msg)
	}
	if ticket.Delivered() {
		// Answered already (a call the caller ran, settled on its goroutine): no channel, no select.
		return ticket.Outcome(), nil
	}
	var cause error
	select {
	case <-ticket.Ready():
		return ticket.Outcome(), nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-c.closed:
		cause = ErrClosed
	}
	if !ticket.Abandon() {
		// The outcome was delivered at the same moment; it wins.
		<-ticket.Ready()
		return ticket.Outcome(), nil
	}
	return actors.Outcome{}, cause
}

// abandon gives up the command cmd sent with ticket, unless its outcome was already delivered, and
// reports whether it did; the lock actor takes an abandoned waiter out of its queue and undoes whatever
// it obtains for it.
func (c *Coordinator) abandon(cmd actors.Routed, ticket *actors.Ticket) bool {
	if !ticket.Abandon() {
		return false
	}
	if !c.isClosed() {
		c.system.Root.Send(c.guardian, &actors.Abandon{Name: cmd.LockName(), Kind: cmd.LockKind(), Ticket: ticket})
	}
	return true
}

// awaitAbandon waits, bounded by ctx and Close, until the actor has processed the abandonment that err
// reports, if err is one.
func (c *Coordinator) awaitAbandon(ctx context.Context, err error) {
	var ab errAbandoned
	if !errors.As(err, &ab) || ab.ack == nil {
		return
	}
	select {
	case <-ab.ack.Ready():
	case <-ctx.Done():
	case <-c.closed:
	}
}

// renewalLinger is how long the coordinator's renewals wait for more holds to renew before they go to
// Redis: a thirtieth of the watchdog timeout (1 s for the default 30 s), a tenth of the watchdog's
// tick. The holds of actors whose ticks fall within it share script calls and round trips; the
// validity they have left when their tick comes (two thirds of the timeout) is hardly touched.
func renewalLinger(watchdog time.Duration) time.Duration { return watchdog / 30 }
