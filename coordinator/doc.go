// Package coordinator is lockwarden's public Go API: distributed locks on Redis that behave like
// Redisson's, built as actors.
//
// # Getting started
//
// Create one [Coordinator] per process and Redis deployment with [New], take handles with
// [Coordinator.Mutex], and [Coordinator.Close] it at shutdown:
//
//	c, err := coordinator.New(redisClient)
//	...
//	defer c.Close()
//	m := c.Mutex("orders:42")
//	if err := m.Lock(ctx); err != nil { ... }
//	defer m.Unlock(ctx)
//
// or, in one call that also cancels the work's context when the lock is lost ([Mutex.Do]):
//
//	err := m.Do(ctx, func(ctx context.Context) error { return work(ctx) })
//
// # Options
//
// Every option type ([Option], [MutexOption], [GroupOption], [TryOption]) has one shape: a function
// that applies its value and returns its validation error. Each call that takes options applies them
// in order and reports the first error at once: [New] returns it; a handle's constructor
// ([Coordinator.Mutex], [Coordinator.FairMutex], [Coordinator.RWMutex], [Coordinator.MultiLock],
// [Coordinator.RedLock]), which does no I/O and returns no error, keeps it as the handle's
// construction error, which the handle's Err method reports right away and every call on the handle
// returns; TryLock returns it before it does anything else.
//
//	m := c.Mutex("orders:42", coordinator.WithLease(10*time.Second))
//	if err := m.Err(); err != nil { ... } // ErrEmptyName, ErrEmptyOwner, ErrInvalidLease
//
// # Kinds of lock
//
// [Coordinator.Mutex] is Redisson's reentrant lock. [Coordinator.FairMutex] serves waiters in arrival
// order across processes (RFairLock). [Coordinator.RWMutex] is a read-write lock (RReadWriteLock)
// whose sides are [Mutex] handles too. All three use Redisson's layout in Redis, and share the hash at
// the lock's name: an owner id used for two kinds on one name gets [ErrKindMismatch] from the calls of
// the kind it does not hold, and from a call of one kind while a call of the other is under way.
//
// [Coordinator.MultiLock] takes several locks, possibly on different coordinators and servers, as one;
// [Coordinator.RedLock] is the Redlock algorithm over the same lock on independent masters. Both are
// [Group] handles, driven by a supervisor actor that asks the members in parallel.
//
// # Replica sync
//
// After every acquisition the coordinator waits (WAIT) for the master's replicas to acknowledge it, and
// gives the hold back with [ErrNotSynced] when too few do, so that a failover cannot hand the lock to a
// second owner ([WithReplicaSync], on by default when the master has replicas: a majority of them
// within 1s).
//
// # Waiting and the watchdog
//
// A waiter is woken by the unlock notice that Redis publishes when the lock becomes free, with the
// holder's remaining lease as a fallback. Inside one coordinator, waiters on a name queue in arrival
// order and only the head of the queue asks Redis. A lock taken without a lease is renewed by a
// watchdog every third of the watchdog timeout ([WithWatchdogTimeout], default 30s), and a tenth of it
// after a renewal that did not count; its [Mutex.Done] channel closes if the hold is lost.
//
// # Actor message API
//
// Actors drive locks by message. [Coordinator.PID] is the gateway actor; Request it with
// [messages.Acquire], [messages.Release], [messages.ForceUnlock] or [messages.Status] from an actor of
// the same actor system ([WithActorSystem] puts the coordinator into the application's system;
// [Coordinator.ActorSystem] is the system either way), and the reply arrives as a message:
//
//	func (w *worker) Receive(ctx actor.Context) {
//		switch m := ctx.Message().(type) {
//		case *actor.Started:
//			ctx.Request(w.locks, &messages.Acquire{Name: "orders:42", Wait: messages.WaitForever})
//		case *messages.Acquired:
//			// work, then ctx.Request(w.locks, &messages.Release{Name: m.Name})
//		case *messages.Error:
//			// errors.Is(m, coordinator.ErrEmptyName), ...
//		}
//	}
//
// The gateway never blocks: each command goes to the lock actor with a ticket whose callback sends the
// reply to the requester. Acquire.Wait is 0 for one attempt, a positive duration for a bounded wait,
// or [messages.WaitForever]; Acquire.Lease is 0 for a watchdog hold. Negative durations, an empty name
// and an unknown kind get an [messages.Error] reply ([ErrInvalidWait], [ErrInvalidLease],
// [ErrEmptyName], [ErrInvalidKind]); so does an unknown message ([ErrInvalidMessage]), and an Acquire
// or Release whose Kind is not the kind of the owner's holds of the name, or of its Acquire of the name
// still under way ([ErrKindMismatch]; Redis is untouched).
//
// A message without an Owner is owned by its sender actor: the owner id is "<coordinator
// ID>:<address>/<id>" from the sender's PID. The gateway watches that actor while it holds or waits for
// a lock, and when the actor stops (a supervisor stopping a crashed actor included) it drops the
// actor's waits and releases each of its holds, every re-entry, within a few milliseconds (one Redis
// round trip per hold), and logs each release with the cause [messages.ReleaseCauseOwnerStopped].
// Such a message must come with Request from an actor: a future (RequestFuture) cannot own a lock and
// gets [ErrNoOwner]. A message with an explicit Owner may come from anywhere, and its holds are not tied
// to the sender's life. A message sent with Send has nobody to answer and is dropped with a warning.
//
// # Lock events
//
// [Coordinator.Subscribe] returns a [Subscription] whose channel carries the coordinator's lock events
// ([messages.Event]: acquired, released, lost, wait-started, handed-off, ...), selected by a filter such
// as [ForLock] or [OfType]. Events never block the locks, and no consumer waits for another: a
// subscriber whose buffer is full misses events of its own ([Subscription.Dropped]). They are also
// published on the actor system's EventStream, from a queue of its own
// ([Coordinator.EventStreamDropped]), and with [WithEventJournal] appended to a Redis Stream that other
// processes read with [ReadJournal] or [ParseJournalEntry] ([Coordinator.JournalDropped]); every field
// of an event survives the journal.
//
// # Tracing and metrics
//
// The coordinator records OpenTelemetry spans (an acquire or release span in the caller's trace, with an
// event per Redis call the lock actor makes for it, unless the first attempt got the lock or the call
// succeeded) and lock metrics, through the global providers
// or those given with [WithTracerProvider] and [WithMeterProvider]. [WithLockNameAttribute] adds lock
// names to them; [WithoutTelemetry] turns them off. Package [github.com/lockwarden/lockwarden/telemetry]
// lists the spans and instruments.
//
// # Errors
//
// Errors are the sentinel values of this package ([ErrNotObtained], [ErrNotHeld], [ErrClosed], ...),
// possibly wrapped or joined with a context's error; check them with [errors.Is].
package coordinator
