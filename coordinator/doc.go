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
// # Kinds of lock
//
// [Coordinator.Mutex] is Redisson's reentrant lock. [Coordinator.FairMutex] serves waiters in arrival
// order across processes (RFairLock). [Coordinator.RWMutex] is a read-write lock (RReadWriteLock)
// whose sides are [Mutex] handles too. All three use Redisson's layout in Redis.
//
// # Waiting and the watchdog
//
// A waiter is woken by the unlock notice that Redis publishes when the lock becomes free, with the
// holder's remaining lease as a fallback. Inside one coordinator, waiters on a name queue in arrival
// order and only the head of the queue asks Redis. A lock taken without a lease is renewed by a
// watchdog every third of the watchdog timeout ([WithWatchdogTimeout], default 30s); its [Mutex.Done]
// channel closes if the hold is lost.
//
// # Errors
//
// Errors are the sentinel values of this package ([ErrNotObtained], [ErrNotHeld], [ErrClosed], ...),
// possibly wrapped or joined with a context's error; check them with [errors.Is].
package coordinator
