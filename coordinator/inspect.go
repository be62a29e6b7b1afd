package coordinator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// Version is the version of lockwarden, as coordinators register it (see [Process]).
const Version = "0.1.0"

// Inspection is what Redis stores under a name, read by [Coordinator.Inspect] in one consistent
// snapshot: the kind of object, its holders with their hold counts and processes, the remaining
// lease, the fencing token, a fair lock's queue, a read-write lock's mode, a semaphore's permits.
type Inspection = redisops.Inspection

// Holder is one owner holding a lock, in an [Inspection].
type Holder = redisops.Holder

// Waiter is one owner queued for a fair lock, in an [Inspection].
type Waiter = redisops.Waiter

// AcquiredPermit is one acquired permit of a permit semaphore, in an [Inspection].
type AcquiredPermit = redisops.AcquiredPermit

// Process is a lockwarden process as its coordinator registered itself in Redis: host, process id,
// program, start time and version. [Coordinator.Inspect] maps owner ids to processes with it.
type Process = redisops.Process

// ObjectKind is what [Coordinator.Inspect] found stored under a name.
type ObjectKind = redisops.ObjectKind

// The kinds of object an [Inspection] reports.
const (
	// ObjectNone: nothing is stored under the name (a free lock, or a latch counted down).
	ObjectNone = redisops.ObjectNone
	// ObjectLock: a reentrant lock (or a fair lock with no waiters; the two keep the same hash).
	ObjectLock = redisops.ObjectLock
	// ObjectFairLock: a fair lock with waiters queued.
	ObjectFairLock = redisops.ObjectFairLock
	// ObjectReadWriteLock: a read-write lock.
	ObjectReadWriteLock = redisops.ObjectReadWriteLock
	// ObjectPermitSemaphore: a semaphore of permits with ids.
	ObjectPermitSemaphore = redisops.ObjectPermitSemaphore
	// ObjectSemaphore: a counting semaphore (told from a latch by who listens to its channel).
	ObjectSemaphore = redisops.ObjectSemaphore
	// ObjectLatch: a count-down latch (told from a semaphore by who listens to its channel).
	ObjectLatch = redisops.ObjectLatch
	// ObjectCounter: a semaphore or a count-down latch; Redis keeps both as a number, and nobody
	// listening tells which.
	ObjectCounter = redisops.ObjectCounter
	// ObjectOther: data that no lock, semaphore or latch keeps under the name.
	ObjectOther = redisops.ObjectOther
)

// InspectLimit is the most entries an [Inspection] lists of its holders, queue and permits; its
// Truncated field says when there were more.
const InspectLimit = redisops.InspectLimit

// DefaultListLimit is the most names [Coordinator.List] returns.
const DefaultListLimit = 10000

// Inspect reports what Redis stores under name, whoever took it (lockwarden, Redisson or another
// client of Redisson's layout), changing nothing:
//   - the kind of object;
//   - for a lock, its holders with owner ids and hold counts, the remaining lease and the fencing-token
//     counter; for a lockwarden owner also the process that holds it and, for a hold older than about
//     a second, since when;
//   - for a fair lock, the queue in order with each waiter's deadline;
//   - for a read-write lock, the mode, the readers (each with its longest remaining read lease) and the
//     writer;
//   - for a semaphore its available permits, for a permit semaphore the acquired permits with their
//     expiry, for a latch its count;
//   - the subscriptions to the name's channels: who waits for it, or listens to it.
//
// The state is read in one script call, so it is consistent; the processes are looked up in the
// process registry after it (see [WithoutProcessRegistry]). Inspect works on any name, also one
// this coordinator never used, and on every deployment (in Redis Cluster, the name's slot decides
// the node). It returns [ErrEmptyName] for an empty name and [ErrClosed] after Close.
func (c *Coordinator) Inspect(ctx context.Context, name string) (Inspection, error) {
	if name == "" {
		return Inspection{}, ErrEmptyName
	}
	if c.isClosed() {
		return Inspection{}, ErrClosed
	}
	in, err := redisops.Inspect(ctx, c.client, name)
	if err != nil {
		return Inspection{}, err
	}
	if err := c.attachProcesses(ctx, &in); err != nil {
		return Inspection{}, err
	}
	return in, nil
}

// attachProcesses sets the Process of each holder and waiter of in whose client id is registered, and
// the HeldSince of each holder whose process records it.
func (c *Coordinator) attachProcesses(ctx context.Context, in *Inspection) error {
	seen := map[string]bool{}
	var ids []string
	add := func(owner string) {
		if id := redisops.OwnerClientID(owner); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	holds := make([]redisops.HoldQuery, len(in.Holders))
	for i, h := range in.Holders {
		add(h.Owner)
		holds[i] = redisops.HoldQuery{ID: redisops.OwnerClientID(h.Owner), Owner: h.Owner, Name: in.Name}
	}
	for _, w := range in.Queue {
		add(w.Owner)
	}
	procs, since, err := redisops.LookupProcesses(ctx, c.client, ids, holds...)
	if err != nil {
		return err
	}
	find := func(owner string) *Process {
		if p, ok := procs[redisops.OwnerClientID(owner)]; ok {
			return &p
		}
		return nil
	}
	for i := range in.Holders {
		in.Holders[i].Process = find(in.Holders[i].Owner)
		if in.Holders[i].Process != nil {
			in.Holders[i].HeldSince = since[i]
		}
	}
	for i := range in.Queue {
		in.Queue[i].Process = find(in.Queue[i].Owner)
	}
	return nil
}

// List returns, sorted, the names matching pattern (glob-style, as Redis' SCAN MATCH takes it; ""
// is "*") under which a lock, semaphore or latch is stored, found with SCAN on the server, or on every
// master of a Redis Cluster: the hash and string keys, less the keys that locks keep beside their name
// (a fair lock's queue, fencing-token counters, release latches, read hold timeouts) and every key
// starting with "lockwarden_". A free lock is not listed: nothing is stored under its name. Other data
// of the application matching pattern is listed too; [Coordinator.Inspect] tells what each name holds.
//
// It returns at most [DefaultListLimit] names, and then an error matching [ErrListTruncated] with
// them. Since SCAN walks the keys while they change, a name taken or freed meanwhile may be missing.
// It returns [ErrClosed] after Close.
func (c *Coordinator) List(ctx context.Context, pattern string) ([]string, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	names, full, err := redisops.List(ctx, c.client, pattern, DefaultListLimit)
	if err != nil {
		return nil, err
	}
	if full {
		return names, fmt.Errorf("%w: the first %d names matching %q", ErrListTruncated, len(names), pattern)
	}
	return names, nil
}

// Processes returns the registered lockwarden processes with the coordinator ids, as [Coordinator.Inspect]
// maps owners to them; an id that is not registered is missing from the map.
func (c *Coordinator) Processes(ctx context.Context, ids ...string) (map[string]Process, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	procs, _, err := redisops.LookupProcesses(ctx, c.client, ids)
	return procs, err
}

// thisProcess is the registration of the coordinator: this host and process.
func (c *Coordinator) thisProcess() Process {
	host, _ := os.Hostname()
	program := ""
	if len(os.Args) > 0 {
		program = filepath.Base(os.Args[0])
	}
	return Process{ID: c.id, Host: host, PID: os.Getpid(), Program: program, Started: c.started, Version: Version}
}

// holdsRecordedAfter is how old a hold must be before the process registry records it: the holds
// that matter to an operator are the long ones, and a younger hold would make the registration churn.
const holdsRecordedAfter = time.Second

// maxRecordedHolds bounds the holds a registration records: the oldest are kept.
const maxRecordedHolds = 1000

// registerProcess keeps the coordinator registered in Redis (see [WithoutProcessRegistry]) until the
// lifetime ends: it writes the registration with an expiry of the watchdog timeout, whole, every third
// of it, and records its holds older than holdsRecordedAfter in it every holdsRecordedAfter in between.
// After a failure it tries again later and later, up to every third of the watchdog timeout. Once the
// coordinator's actors have stopped at Close (and released what they held), it deletes the
// registration.
func (c *Coordinator) registerProcess() {
	defer c.registry.Done()
	ttl := c.opts.watchdogTimeout
	p := c.thisProcess()
	tick := min(holdsRecordedAfter, ttl/3)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var (
		written map[string]time.Time // the holds in the registration, nil when it must be written whole
		renewAt time.Time
		entries []actors.HeldEntry
		backoff time.Duration // the wait after the last failure, 0 after a success
	)
	for {
		select {
		case <-c.lifetime.Done():
			<-c.actorsStopped
			ctx, cancel := c.stop.Context()
			defer cancel()
			if err := redisops.UnregisterProcess(ctx, c.client, c.id); err != nil {
				c.opts.logger.Debug("process registry", "error", err)
			}
			return
		case <-timer.C:
		}
		now := time.Now()
		entries = c.held.HeldBefore(now.Add(-holdsRecordedAfter), entries)
		holds := make(map[string]time.Time, min(len(entries), maxRecordedHolds))
		for _, e := range entries[:min(len(entries), maxRecordedHolds)] {
			holds[redisops.HeldField(e.Owner, e.Name)] = e.Since
		}
		// Bounded by the stop release timeout too: go-redis ends a read blocked on a stalled
		// connection at the deadline, not when the lifetime ends, and Close waits for this loop.
		ctx, cancel := context.WithTimeout(c.lifetime, min(ttl/3, c.opts.stopReleaseTimeout))
		var err error
		if written == nil || !now.Before(renewAt) {
			if err = redisops.RegisterProcess(ctx, c.client, p, ttl, holds); err == nil {
				written, renewAt = holds, now.Add(ttl/3)
			}
		} else {
			added, removed := diffHolds(written, holds)
			if err = redisops.UpdateHolds(ctx, c.client, c.id, added, removed); err == nil {
				written = holds
			}
		}
		cancel()
		next := tick
		if err != nil {
			if backoff == 0 && c.lifetime.Err() == nil {
				c.opts.logger.Warn("process registry: cannot write the registration; retrying", "error", err)
			}
			backoff = min(max(2*backoff, tick), ttl/3)
			next, written = backoff, nil // written whole at the next attempt
		} else {
			backoff = 0
		}
		timer.Reset(next)
	}
}

// diffHolds returns the holds of now that were not in before (or with another time), and the fields
// of before no longer in now.
func diffHolds(before, now map[string]time.Time) (map[string]time.Time, []string) {
	added := map[string]time.Time{}
	for f, t := range now {
		if old, ok := before[f]; !ok || !old.Equal(t) {
			added[f] = t
		}
	}
	var removed []string
	for f := range before {
		if _, ok := now[f]; !ok {
			removed = append(removed, f)
		}
	}
	return added, removed
}

// LocalOwner is what one owner of this coordinator holds and waits for on one lock name, as
// [Coordinator.Local] reports it.
type LocalOwner struct {
	// Name is the lock name.
	Name string
	// Owner is the owner id (see [Mutex.Owner]).
	Owner string
	// Held are the kinds of lock the owner holds on the name: [messages.KindPlain], [messages.KindFair],
	// [messages.KindRead] or [messages.KindWrite] (a writer may hold read holds too).
	Held []messages.Kind
	// HeldSince is when the owner's first hold of the kinds held was granted; zero when none is held.
	HeldSince time.Time
	// Waiting counts the owner's acquisitions of each kind that wait for the lock or are under way.
	Waiting map[messages.Kind]int
	// WaitingSince is when the first of them was asked for; zero when none waits.
	WaitingSince time.Time
}

// Local returns what the owners of this coordinator hold and wait for, on every lock name (plain,
// fair and read-write locks; a semaphore's or latch's state is in Redis, see [Coordinator.Inspect]),
// sorted by name and owner. It reads the coordinator's own records, with no Redis call, so it is
// cheap enough to poll. A hold is listed from the moment it is granted until it is released or
// lost; an acquisition from the moment its lock actor takes it until it is answered. The records are
// read a group of names at a time, so a list taken while locks change may show two names as they were
// at moments a few microseconds apart; each owner's record on one name is whole. After Close it
// returns nothing.
func (c *Coordinator) Local() []LocalOwner {
	if c.isClosed() {
		return nil
	}
	states := c.held.Snapshot()
	out := make([]LocalOwner, len(states))
	for i, st := range states {
		out[i] = LocalOwner{Name: st.Name, Owner: st.Owner, Held: st.Held, HeldSince: st.HeldSince,
			Waiting: st.Waiting, WaitingSince: st.WaitingSince}
	}
	return out
}

// RegisteredProcesses returns every lockwarden process registered in Redis (see
// [WithoutProcessRegistry]), found with SCAN on every master, sorted by coordinator id.
func (c *Coordinator) RegisteredProcesses(ctx context.Context) ([]Process, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	ids, err := redisops.ProcessIDs(ctx, c.client)
	if err != nil {
		return nil, err
	}
	procs, _, err := redisops.LookupProcesses(ctx, c.client, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Process, 0, len(procs))
	for _, id := range ids {
		if p, ok := procs[id]; ok {
			out = append(out, p)
		}
	}
	return out, nil
}
