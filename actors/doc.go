// Package actors holds lockwarden's actor behaviour: the guardian that binds one actor to each lock
// name and family and routes commands to it, the lock actor that serialises everything about one name, the pub/sub bridge
// that turns Redis unlock notices into messages for the lock actors, and the supervisors of MultiLock
// and RedLock groups.
//
// # Lock actor
//
// A lock actor owns one lock name of one family (plain, fair or read-write; see [Kind]) within one
// coordinator. Its core (queue, holds and their validity, the watchdog, subscriptions, events, the
// stash of messages that wait for calls in flight, timers) is the same for every family; what differs
// between the families (their Redis scripts, who may hold the lock next to whom, handoffs, the channel
// a waiter listens on, what a waiter keeps alive in Redis) is in one strategy per family. A fair
// waiter takes its place in the Redis queue on arrival and is woken on its own channel; readers of a
// read-write lock share the lock locally as they do in Redis. It runs acquire, re-entry, release and
// renewal one at a time, keeps the local holders of the name, and keeps a FIFO of local waiters. Only the waiter
// at the head of the queue tries Redis on each wake-up, so many goroutines waiting in one process cost
// Redis one attempt per wake-up. A waiter retries after the channel subscription is confirmed, so an
// unlock published between the failed try and the subscription is never missed.
//
// Some calls go to Redis without the actor waiting (batch.go, solo.go): a reentrant lock's first
// attempt of an acquisition and its release (one call at a time), and the read acquires and read
// releases of a read-write lock (read batches); the answer comes back as a message, and the messages
// that cannot go along with the call in flight wait in a stash, in order. The watchdog's renewals go
// through [Env.Renewals] and come back the same way. The other calls are made on the actor's turn,
// which waits for Redis: the attempts of queued waiters, every call of a fair lock and of a write
// lock, force unlock, an Extend of a hold with a fixed lease, giving back a hold that was lost or
// answered late, and keeping a waiting writer's intent. A panic while the actor handles a message, or
// on a call's goroutine, is recovered: the callers it concerns get [ErrActorFailed], and the stash is
// replayed once no call is in flight.
//
// When a local holder of a plain lock releases while a local waiter is queued, the release script hands
// the lock to the head waiter in the same round trip (a local handoff). A waiter that accepts it
// (Acquire.AcceptEarlyGrant: a Mutex's Lock) is granted at once, before that round trip, with the
// holder's token plus one (early.go): the holder's hold is valid in Redis until its validity runs out,
// so no other client can take the lock meanwhile, and the token counter kept the waiter's token
// unissued when the holder's was issued (the release raises the counter past it). The answer
// confirms the hold; a definite refusal ends it; an unknown outcome (a Redis error) leaves it valid
// but unconfirmed until the release, sent again (the holder's retried
// Unlock, either owner's next command, or the watchdog's next try), has an answer, and at most until
// the holder's validity. After [Env.MaxHandoffs] handoffs in a row, the release hands off only if no
// other client is subscribed to the lock's channel, and otherwise publishes an ordinary unlock, so that
// waiters in other processes get their turn: the local head waiter lets them go first, trying only 2
// ms after that unlock's notice. There a waiter is granted early only when the previous count of
// listeners found none; the release then hands off all the same and counts them again.
//
// The watchdog renews holds taken without a lease every watchdog timeout / 3, its ticks rounded up to a
// thirtieth of the watchdog timeout so that the holds of all the actors taken at about the same time are
// renewed on the same tick.
// A renewal that answers "not held", or a lease that runs out before a renewal succeeds, marks the hold
// as lost and closes its Done channel. A renewal that does not count (an error, an answer after the
// hold's validity, or, with replica sync, replicas that did not acknowledge it) leaves the hold's
// validity where it was and is tried again after a tenth of the watchdog timeout. With [Env.Renewals]
// (a coordinator's [Renewals]), an actor hands the holds due on its tick to that collector, which
// renews the holds of every actor together, and settles the answers when they come back as a message:
// it does not wait for Redis.
//
// When a local holder of a fair lock releases, the release hands the lock to the earliest local waiter in
// the same round trip if that waiter heads the Redis queue. Otherwise, when the head registered for
// handoffs (every waiter with an owner id of its own does), the release gives it the lock wherever it
// is and tells it on its channel with its token; the actor that gets that notice grants the lock to
// the waiter without a Redis call, counting the lease from the waiter's last attempt, which was sent
// before the grant. Any other head is woken on its own channel and tries.
//
// # Families
//
// The files of the lock actor: lock.go (the actor, its messages and lifecycle), acquire.go (attempts
// and grants), queue.go (the local waiters), release.go, holds.go (holds, their validity and loss),
// watchdog.go (renewals), subscriptions.go, events.go, and batch.go and solo.go (calls that go to Redis
// without the actor waiting). Each family has a file of its own with its strategy: plain.go, fair.go,
// rw.go. A family is registered by one entry in the table of family.go, which names its kinds (of
// messages.Kind) and makes its strategy; a new family needs its kind, its strategy, its scripts in
// redisops and that entry.
//
// # Timers and idle actors
//
// A lock actor's timers (lease expiry, watchdog, retry of the head waiter, write intent, fair places,
// idle time) are deadlines of its own. The coordinator's timer service ([Timers], one goroutine with
// heaps in shards, each with its own lock, owned by the guardian) holds one wake-up per actor, at its
// earliest deadline; a deadline that moves later, as the expiry, watchdog and idle deadlines do on
// every Lock and Unlock, does not touch it. On a [Wake] the actor runs every timer whose deadline
// passed, as the tick it stands for (a tick of a timer re-armed since is recognised by its
// generation), and registers its next deadline.
//
// A lock actor with no holders, no waiters and nothing in flight for [Env.IdleTimeout] reports itself
// idle. The guardian then unbinds it from its name, if every command sent to it has arrived, and
// keeps it in a pool (at most [MaxPooledActors]); the next new name gets a pooled actor, rebound to
// it, rather than a newly spawned one. A recycled actor drops its subscriptions, timers and everything
// it knew of its old name.
//
// A handle asks the guardian for its actor once ([Locate]) and keeps the answer, a [Route], on which
// it sends its next commands itself: the guardian's turn, which every handle of the coordinator would
// otherwise share, is off the path of a Lock and an Unlock. The guardian and the handles count the
// commands sent on a route on one counter, and the guardian retires the route with a compare-and-swap
// of it before unbinding the actor, so no command is sent to an actor after it was unbound, nor is
// one on its way when it is.
//
// # Events and telemetry
//
// Every change in a hold's or a waiter's life goes to [Env.Events] as a messages.Event, in the order it
// happened; the sink must not block. The Redis calls made for a caller are recorded as events on the
// caller's span, which the command carries ([Acquire.Span]): every attempt of an acquisition that did
// not get the lock at its first attempt, and every failed call.
//
// # Groups
//
// A group supervisor ([NewGroupProps]) drives the members of a MultiLock or RedLock through one child
// actor each. The members are asked at once; the supervisor counts the answers against the quorum
// ([Quorum]), checks a RedLock's validity ([Validity]), releases what a failed attempt took and retries
// after a backoff with jitter. Neither the supervisor nor its children ever block: they run inline on
// a synchronized dispatcher, and the members are driven through callbacks ([GroupMember]). Each
// member's attempt is bounded by the node timeout ([NodeTimeoutFor] by default). A call that ends
// answers only once the releases of what its last attempt took have answered; a caller that leaves
// sends [GroupAbandon], which cancels the attempt in flight, and gets the [GroupFailure] that says why
// the group was not obtained. A [GroupClose] shuts a supervisor down without blocking.
//
// # Callers
//
// Callers are Go code that send commands carrying a [Ticket] and wait on it. A caller that gives up
// abandons its ticket; when the actor later obtains the lock for an abandoned ticket, it releases it at
// once, so no lock leaks because a context ended at the wrong moment. A caller that cannot give up
// may open its ticket's carry ([Ticket.OpenCarry]) around the post of its command: an idle lock
// actor then hands it the command's Redis call, to make on its own goroutine.
package actors
