package coordinator

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockwarden/lockwarden/redisops"
	"github.com/lockwarden/lockwarden/telemetry"
)

// Defaults of the coordinator options.
const (
	// DefaultWatchdogTimeout is the lease of a lock taken without one, renewed by the watchdog every
	// third of it, when [WithWatchdogTimeout] is not given: 30s, as in Redisson.
	DefaultWatchdogTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a lock name's actor stays bound to it with no holders and no
	// waiters, when [WithIdleTimeout] is not given: 10s.
	DefaultIdleTimeout = 10 * time.Second
	// DefaultMaxHandoffs is the number of local handoffs in a row after which a release lets other
	// processes' waiters have their turn, when [WithMaxHandoffs] is not given: 8.
	DefaultMaxHandoffs = 8
	// DefaultEarlyHandoffWindow is how recently Redis must have confirmed a holder's hold for its
	// release to let a local [Mutex] waiter in before Redis answers, when [WithEarlyHandoffWindow] is
	// not given: 3 ms.
	DefaultEarlyHandoffWindow = 3 * time.Millisecond
	// DefaultStopReleaseTimeout is how long Close spends on Redis in all, when
	// [WithStopReleaseTimeout] is not given: 2s.
	DefaultStopReleaseTimeout = 2 * time.Second
	// DefaultFairWaitWindow is how long a fair lock's waiter keeps its place in the Redis queue without
	// refreshing it, when [WithFairWaitWindow] is not given: 5 minutes, as in Redisson.
	DefaultFairWaitWindow = 5 * time.Minute
	// DefaultSyncReplicas is the replica count of the replica-sync safeguard when [WithReplicaSync]
	// is not given: a majority of the replicas attached to the master ([MajorityOfReplicas]).
	DefaultSyncReplicas = redisops.DefaultSyncReplicas
	// DefaultSyncTimeout is how long the replica-sync safeguard waits for the replicas to acknowledge
	// a hold (the WAIT timeout) when [WithReplicaSync] is not given: 1s, Redisson's slavesSyncTimeout.
	DefaultSyncTimeout = redisops.DefaultSyncTimeout
)

// MajorityOfReplicas is the replica count of [WithReplicaSync] that asks every new hold to reach a
// majority of the replicas attached to the master when the hold is taken: n/2+1 of n (1 of 1, 2 of 2,
// 2 of 3, 3 of 4, 3 of 5). It is the default.
const MajorityOfReplicas = redisops.MajorityOfReplicas

// MaxDuration is the longest duration lockwarden accepts for a lease, a wait, a watchdog timeout, a
// fair wait window or any other duration option: a year. Every such duration becomes milliseconds for
// Redis (PEXPIRE, fair-queue deadlines in ms since the epoch plus windows, WAIT timeouts) or is added to
// time.Now(); a year is far beyond any lease or wait a lock needs, and keeps all of these values, and
// their sums, well inside the integers that Redis' Lua (doubles, exact to 2^53) and time.Time handle
// exactly. Longer durations, which used to overflow (a lease near math.MaxInt64 became a 1 ms lease),
// are refused: with [ErrInvalidOption] by New and by group options, with [ErrInvalidLease] or
// [ErrInvalidWait] by the calls that take them. A lock that must outlive a year is better held by the
// watchdog, which renews it for as long as it is held.
const MaxDuration = 365 * 24 * time.Hour

// MinLease is the shortest lease, and watchdog timeout, lockwarden accepts: 10 ms. A hold is valid for
// its lease counted from when the call was sent, less a drift allowance of 1% plus 2 ms, so a shorter
// lease leaves too little room for a round trip to Redis: its grants would come back with no validity
// left, and be given back, again and again. Shorter leases are refused with [ErrInvalidLease] (with
// [ErrInvalidOption] for WithWatchdogTimeout).
const MinLease = 10 * time.Millisecond

// MaxWorkers is the largest worker pool [WithWorkers] accepts: far more warm goroutines than the
// actors of a coordinator keep busy at once (work beyond the pool runs on goroutines of its own
// anyway), and few enough that their stacks cost a few tens of MB at most.
const MaxWorkers = 4096

type options struct {
	telemetry          telemetry.Config
	noTelemetry        bool
	noProcessRegistry  bool
	journalStream      string
	journalMaxLen      int64
	watchdogTimeout    time.Duration
	idleTimeout        time.Duration
	maxHandoffs        int
	earlyHandoffWindow time.Duration
	stopReleaseTimeout time.Duration
	fairWaitWindow     time.Duration
	persistentTokens   bool
	syncReplicas       int
	syncTimeout        time.Duration
	// workers is the size of the worker pool, 0 for the default (workerPoolSize).
	workers int
	logger  *slog.Logger
	system  *actor.ActorSystem
	// inject runs before every message of the coordinator's actors; the tests of this package set it
	// to make an actor panic.
	inject func(actor string, msg any)
}

func defaultOptions() options {
	return options{
		watchdogTimeout:    DefaultWatchdogTimeout,
		idleTimeout:        DefaultIdleTimeout,
		maxHandoffs:        DefaultMaxHandoffs,
		earlyHandoffWindow: DefaultEarlyHandoffWindow,
		stopReleaseTimeout: DefaultStopReleaseTimeout,
		fairWaitWindow:     DefaultFairWaitWindow,
		syncReplicas:       DefaultSyncReplicas,
		syncTimeout:        DefaultSyncTimeout,
		logger:             slog.New(slog.DiscardHandler),
	}
}

// Option configures a Coordinator. An option with an invalid value makes New fail with
// [ErrInvalidOption].
//
// Option has the shape of every option type of the package ([MutexOption], [GroupOption],
// [TryOption]): a function that applies its value and returns its validation error. The call that
// takes options applies them in order, ignores nil ones, and stops at the first error, which it
// reports at once.
type Option func(*options) error

// applyOptions applies opts to o in order, skipping nil ones, and returns the first error; the
// options after it are not applied.
func applyOptions[T any, O ~func(*T) error](o *T, opts []O) error {
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(o); err != nil {
			return err
		}
	}
	return nil
}

// WithWatchdogTimeout sets the lease of locks taken without one. The watchdog renews such locks every
// third of it for as long as they are held, and a holder that stops renewing (a crashed process) frees
// the lock within about this long. The renewals of all the coordinator's locks due within a thirtieth
// of it go to Redis together, up to 100 per script call, as Redisson's renewal scheduler sends them. It
// must be at least [MinLease] and at most [MaxDuration]. The default is 30s, as in Redisson.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < MinLease || d > MaxDuration {
			return fmt.Errorf("%w: watchdog timeout %v must be in [%v, %v]", ErrInvalidOption, d, MinLease, MaxDuration)
		}
		o.watchdogTimeout = d
		return nil
	}
}

// WithWorkers sets how many warm goroutines New starts to run the coordinator's actors (the lock
// actors, the semaphore and latch actors, the gateway) and their Redis calls that do not wait on an
// actor's turn (a reentrant lock's first attempts and releases, a read-write lock's read batches).
// They live until Close. When every one of them is busy, the work runs on a new goroutine, so a small
// pool never holds a lock up: the pool only saves those goroutines the cost of starting, and of
// growing their stacks on the way into the Redis client. Each idle worker costs a goroutine and its
// stack (a few KB). n must be at least 1 and at most [MaxWorkers], or New returns
// [ErrInvalidOption]. The default is 16 per GOMAXPROCS, as read by New: enough for every core to be
// busy while many actors wait on Redis.
func WithWorkers(n int) Option {
	return func(o *options) error {
		if n < 1 || n > MaxWorkers {
			return fmt.Errorf("%w: workers %d must be in [1, %d]", ErrInvalidOption, n, MaxWorkers)
		}
		o.workers = n
		return nil
	}
}

// WithLogger sets the logger that receives the coordinator's diagnostics: lost locks, failed renewals,
// Redis errors while waiting. A nil logger is silent. The default is silent. protoactor's own logging is
// always suppressed.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		o.logger = l
		return nil
	}
}

// WithoutProcessRegistry keeps the coordinator out of the process registry. By default a coordinator
// registers itself in Redis while it runs, under lockwarden_process:<coordinator id>: a hash of its
// host, process id, program, start time and version, and one field per hold of its owners that is
// older than a second (since when it is held; the 1000 oldest holds), with an expiry of the watchdog
// timeout. The coordinator writes it whole every third of the watchdog timeout, updates the holds
// every second (one round trip when they changed), and deletes it at Close once its holds are
// released. [Coordinator.Inspect] and the lockwarden command then show which process holds a lock, and
// since when, rather than only its owner id. Tools that only look, such as the lockwarden command,
// turn it off.
func WithoutProcessRegistry() Option {
	return func(o *options) error {
		o.noProcessRegistry = true
		return nil
	}
}

// checkDuration is the check of an option's duration d that must be positive and at most
// [MaxDuration]: its error, wrapping [ErrInvalidOption], names the option as what.
func checkDuration(what string, d time.Duration) error {
	if d <= 0 || d > MaxDuration {
		return fmt.Errorf("%w: %s %v must be in (0, %v]", ErrInvalidOption, what, d, MaxDuration)
	}
	return nil
}

// WithIdleTimeout sets how long the actor of a lock name stays bound to it with no holders and no
// waiters before it is unbound, so that many distinct names don't keep many actors alive. An unbound
// actor goes back to a pool of at most [actors.MaxPooledActors] (past that it stops), and the next new
// name reuses it instead of spawning an actor. It must be positive and at most [MaxDuration]. The
// default is 10s.
func WithIdleTimeout(d time.Duration) Option {
	return func(o *options) error {
		if err := checkDuration("idle timeout", d); err != nil {
			return err
		}
		o.idleTimeout = d
		return nil
	}
}

// WithEarlyHandoffWindow sets how recently Redis must have confirmed a holder's hold (the call that
// did was sent at most d ago) for its release to let the [Mutex] waiter it hands the lock to in
// before Redis answers that release (see [Mutex.Lock]). The grant counts on the holder's field being
// in Redis, which Redis can lose only by losing data (a restart, a failover), and no restart or
// failover completes within a few milliseconds of the last call it answered; a hold confirmed longer
// ago may have been lost that way unnoticed. The default, [DefaultEarlyHandoffWindow] (3 ms), covers
// runs of short holds, where a handoff's round trip is most of the lock's idle time. Zero turns early
// handoffs off: every waiter gets the lock once Redis has answered. d must not be negative or above
// [MaxDuration] ([ErrInvalidOption]).
func WithEarlyHandoffWindow(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 || d > MaxDuration {
			return fmt.Errorf("%w: early handoff window %v must be between 0 and %v", ErrInvalidOption, d, MaxDuration)
		}
		o.earlyHandoffWindow = d
		return nil
	}
}

// WithMaxHandoffs bounds local handoffs in a row. When a holder releases a lock that a goroutine of the
// same coordinator waits for, the lock goes straight to that waiter in the release's round trip (a
// [Mutex] waiter gets it before that round trip: see [Mutex.Lock]). After n handoffs in a row, a
// release hands the lock off only if no other client is subscribed to the lock's channel; otherwise it
// publishes an ordinary unlock, so that waiters in other processes get their turn (the head waiter of
// this coordinator's [Mutex] tries again only 2 ms after that unlock, so that theirs go first). A
// [Mutex] waiter is granted early there only when the previous release that counted the listeners
// found none; that release hands off all the same and counts them again, so a client that started to
// listen since gets its turn one release later.
// Zero turns local handoffs off; n must not be negative. The default is 8. A semaphore hands released
// permits to the local waiters at most min(n, 4) times in a row (see [Semaphore.Release]). A fair lock's handoff to the
// waiter at the head of its queue in any process (see FairMutex) follows the queue order and is not
// bounded by n.
func WithMaxHandoffs(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("%w: max handoffs %d must not be negative", ErrInvalidOption, n)
		}
		o.maxHandoffs = n
		return nil
	}
}

// WithStopReleaseTimeout bounds how long Close spends on Redis (but for a lock's acquisition attempt
// in flight on an actor's turn, bounded by its lease): releasing the locks still held, leaving fair
// queues, closing the pub/sub connections and writing the last journal events all share one deadline
// this long after Close starts (see [Coordinator.Close]). It also bounds the undo of an acquisition
// whose caller left, and every Redis call that a lock or primitive actor waits for (but a lock's
// acquisition attempt), the renewals (from when they are sent), the process
// registry's writes and the actor API's status queries, besides each call's own bound, so that a call
// in flight on a stalled connection does not hold Close longer: a call slower than this fails, as on
// any Redis error, and a renewal or a release is tried again. It must be positive and at most 5s. The
// default is 2s.
func WithStopReleaseTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 || d > 5*time.Second {
			return fmt.Errorf("%w: stop release timeout %v must be in (0, 5s]", ErrInvalidOption, d)
		}
		o.stopReleaseTimeout = d
		return nil
	}
}

// WithFairWaitWindow sets how long a waiter of a fair lock keeps its place in the Redis queue without
// refreshing it: a live waiter's lock actor refreshes it every third of the window, and a waiter whose
// process died is purged one window after it stopped, so dead waiters, however many, block the queue for
// about this long in all. A TryLock with [Wait] uses its wait as the window
// instead, as Redisson does. It must be positive and at most [MaxDuration]. The default is 5 minutes,
// as in Redisson.
func WithFairWaitWindow(d time.Duration) Option {
	return func(o *options) error {
		if err := checkDuration("fair wait window", d); err != nil {
			return err
		}
		o.fairWaitWindow = d
		return nil
	}
}

// WithPersistentFencingTokens keeps a fencing-token counter per lock name forever, as Redisson's
// RFencedLock does: every acquisition INCRs redisson_lock_token:{name}, so tokens are small and
// sequential (1, 2, 3, ...) and Redisson clients using RFencedLock on the same names share them. The cost
// is one key per name ever locked (about 90 bytes each), which never goes away.
//
// By default the counter expires: a counter that is gone is set to the Redis server's clock in
// microseconds and lives 10s, and while it lives each acquisition raises it by two and takes the value
// between (the one above is kept for a local handoff), so a name that was locked and released leaves
// no key behind once its unlock latch (10s) has expired.
// Tokens still strictly increase per name, as long as the Redis server's clock does not step back by
// more than those 10s; they are large numbers (about 1.7e15). Every client of one name must use the
// same mode (a counter that expires under an INCRing client starts again from 1).
func WithPersistentFencingTokens() Option {
	return func(o *options) error {
		o.persistentTokens = true
		return nil
	}
}

// WithActorSystem makes the coordinator spawn its actors in system, an actor system of the application,
// instead of creating its own. The application's actors can then talk to the coordinator's gateway
// ([Coordinator.PID]) and be death-watched by it. Close stops only the actors the coordinator spawned and
// leaves system running; the application shuts system down itself, after Close. The system's own
// logger and settings are used as they are. A nil system is an error. By default the coordinator creates
// a quiet actor system of its own and shuts it down at Close.
func WithActorSystem(system *actor.ActorSystem) Option {
	return func(o *options) error {
		if system == nil {
			return fmt.Errorf("%w: nil actor system", ErrInvalidOption)
		}
		o.system = system
		return nil
	}
}
