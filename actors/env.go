package actors

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cenkalti/backoff/v4"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
	"github.com/lockwarden/lockwarden/telemetry"
)

// Env is what every lock actor of one coordinator shares. It is read-only once the actors run.
type Env struct {
	// Ops runs the lock scripts.
	Ops *redisops.Ops
	// Events receives every change in the locks' lives; nil drops them.
	Events EventSink
	// CoordinatorID names the coordinator in events.
	CoordinatorID string
	// Telemetry records the spans of the Redis calls; nil records nothing.
	Telemetry *telemetry.Telemetry
	// Bridge is the pub/sub bridge actor.
	Bridge *actor.PID
	// WatchdogTimeout is the lease of holds taken without one; they are renewed every third of it.
	WatchdogTimeout time.Duration
	// IdleTimeout is how long a lock actor with no holders and no waiters lives on.
	IdleTimeout time.Duration
	// MaxHandoffs bounds the local handoffs in a row while other clients listen on the lock's
	// channel; 0 turns handoffs off.
	MaxHandoffs int
	// EarlyGrantWindow is how recently Redis must have confirmed a reentrant lock's hold for its
	// release to grant the next local waiter before Redis answers (see handsOffEarly): the call that
	// confirmed it was sent at most this long ago. 0 turns early grants off.
	EarlyGrantWindow time.Duration
	// StopReleaseTimeout bounds the best-effort releases of held locks when the actors stop.
	StopReleaseTimeout time.Duration
	// Stop, when not nil, is the deadline that the stop-time work of every actor of the coordinator
	// shares; each release at stop is then bounded by it rather than by StopReleaseTimeout of its own.
	Stop *StopClock
	// Failures is where the actors report a recovered panic (see [Recover]); nil only logs nothing.
	Failures *Failures
	// Context bounds every Redis call; it ends when the coordinator closes.
	Context context.Context
	// Logger receives the actors' diagnostics.
	Logger *slog.Logger
	// Dispatcher runs the lock actors' mailboxes, and the Redis calls of their read batches (which keep
	// a worker for a Redis round trip); nil means protoactor's default and a goroutine per batch.
	Dispatcher actor.Dispatcher
	// NewRequestID returns a release request id that is unique for the coordinator's lifetime. An id
	// of the form "<prefix>:r<n>", n higher than in every id returned before, sequences the releases
	// of an owner, which then share the owner's latch (see redisops.Ops.ReleaseHeld); an id of
	// another form uses a latch of its own.
	NewRequestID func() string
	// Held records the kinds of lock each owner holds on each name, so that a command of another kind
	// than the owner's holds is refused; nil checks nothing.
	Held *HeldKinds
	// Renewals, when not nil, sends the watchdog renewals of every lock actor together; nil makes
	// each actor renew its own holds and wait for the answer.
	Renewals *Renewals
	// NewBackOff returns the retry schedule used while Redis answers with errors.
	NewBackOff func() backoff.BackOff
}

// EventSink receives lock events from the lock actors, in the order each actor emits them. Publish
// must not block: a lock actor calls it in the middle of its work.
type EventSink interface {
	// Publish delivers one event. It runs on the emitting actor's goroutine and must return without
	// waiting for anything.
	Publish(messages.Event)
}

// DefaultBackOff is the schedule a waiting lock actor uses between attempts while Redis fails: from
// 50 ms up to 2 s, with jitter, forever (the caller's context bounds the wait).
func DefaultBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// StopClock is the one deadline that all the stop-time work of a coordinator shares: the releases and
// queue leaves of the lock actors, the releases of the group supervisors, the closing of the pub/sub
// connections and the last writes of the event journal. Each of them would otherwise spend a stop
// release timeout of its own, one after the other, and Close would take a multiple of it during a
// partition. It is safe for concurrent use.
type StopClock struct {
	timeout time.Duration
	mu      sync.Mutex
	at      time.Time
}

// NewStopClock returns a clock whose work is bounded by timeout until [StopClock.Start], and by the
// deadline Start sets after it.
func NewStopClock(timeout time.Duration) *StopClock { return &StopClock{timeout: timeout} }

// Start sets the shared deadline, timeout from now; only the first call counts.
func (s *StopClock) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() {
		s.at = time.Now().Add(s.timeout)
	}
}

// Deadline returns when a piece of stop-time work that starts now must end: timeout from now, and no
// later than the shared deadline once Start was called.
func (s *StopClock) Deadline() time.Time {
	d := time.Now().Add(s.timeout)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && s.at.Before(d) {
		d = s.at
	}
	return d
}

// Context returns a context that ends at [StopClock.Deadline]; it is not bound to the coordinator's
// lifetime, which ends when the stop starts.
func (s *StopClock) Context() (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), s.Deadline())
}

// turnDeadline is the deadline of a Redis call a lock or primitive actor starts now and waits for on
// its turn: the stop release timeout from now, or until when that is sooner (the zero time: no sooner
// bound); until alone when StopReleaseTimeout is not positive. Lock acquisition attempts are not
// bounded so (see acquireCall). go-redis ends a read blocked on a stalled connection at its context's
// deadline (with ContextTimeoutEnabled), not when the context is cancelled, so without it such a call
// would hold the actor, and the coordinator's Close, for the client's read timeout.
func (e *Env) turnDeadline(until time.Time) time.Time {
	if e.StopReleaseTimeout <= 0 {
		return until
	}
	d := time.Now().Add(e.StopReleaseTimeout)
	if !until.IsZero() && until.Before(d) {
		return until
	}
	return d
}

// turnContext bounds a Redis call that an actor waits for on its turn by the coordinator's lifetime
// and by turnDeadline(until).
func (e *Env) turnContext(until time.Time) (context.Context, context.CancelFunc) {
	d := e.turnDeadline(until)
	if d.IsZero() {
		return context.WithCancel(e.Context)
	}
	return context.WithDeadline(e.Context, d)
}

// stopDeadline is when the stop-time work that starts now must end (see [StopClock.Deadline]).
func (e *Env) stopDeadline() time.Time {
	if e.Stop != nil {
		return e.Stop.Deadline()
	}
	return time.Now().Add(e.StopReleaseTimeout)
}

// stopContext bounds a release or a queue leave that runs while the actors stop, or that undoes an
// acquisition its caller abandoned.
func (e *Env) stopContext() (context.Context, context.CancelFunc) {
	if e.Stop != nil {
		return e.Stop.Context()
	}
	return context.WithTimeout(context.Background(), e.StopReleaseTimeout)
}

// boundCalls reports whether a call is worth bounding by a context deadline: the client honours
// deadlines ([redisops.Ops.HonoursDeadlines]), or the Ops is unknown (unit tests).
func (e *Env) boundCalls() bool { return e.Ops == nil || e.Ops.HonoursDeadlines() }
