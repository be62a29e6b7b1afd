package redisops

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// ErrNotSynced is returned when a script gave a lock to an owner but fewer replicas than required
// acknowledged the write within the sync timeout (see [Ops.SetReplicaSync]). The hold was given back
// before the error was returned: the owner does not hold what the call asked for.
var ErrNotSynced = errors.New("lockwarden: lock not acknowledged by replicas")

// ErrReplicasChanged accompanies [ErrNotSynced] when the master's replica count, read again after the
// WAIT fell short, is lower than the one the WAIT asked for (a failover left the new master with fewer
// replicas than the old one) and the hold was given back: a new attempt asks for what the master has
// now, and is safe, since nothing is held.
var ErrReplicasChanged = errors.New("lockwarden: the master's replicas changed")

const (
	// MajorityOfReplicas, given to [Ops.SetReplicaSync] as the replica count, asks every new hold to
	// reach a majority of the replicas attached to the master: n/2+1 of n (1 of 1, 2 of 2, 2 of 3,
	// 3 of 4), so that losing the master together with any minority of its replicas loses no hold.
	MajorityOfReplicas = -1
	// DefaultSyncReplicas is how many replicas must acknowledge a new hold by default: a majority of
	// those attached. Redisson asks for one (checkLockSyncedSlaves fails a lock only when no replica
	// has it), which a failover that takes the master and that one replica together defeats.
	DefaultSyncReplicas = MajorityOfReplicas
	// DefaultSyncTimeout is how long a new hold waits for replicas by default: Redisson's
	// slavesSyncTimeout.
	DefaultSyncTimeout = time.Second
	// ReplicaRefreshInterval is how often the number of replicas attached to a master is read again
	// (INFO replication). It is also read again at once after a connection error, a WAIT that came
	// back short or a server that lost its scripts, so a failover or a replica that went away is
	// noticed at the next call.
	ReplicaRefreshInterval = 5 * time.Second
	// undoTimeout bounds the release that gives back a hold that replicas did not acknowledge, whatever
	// is left of the caller's context: that hold must not linger for a whole lease. It also bounds a
	// reading of the replica counts, which every caller waiting for it shares.
	undoTimeout = 2 * time.Second
)

// replicaSync is the replica-sync safeguard of an [Ops]: WAIT after every script that gives a lock to an
// owner, on the connection of the script. It keeps the number of replicas attached to each master,
// and which scripts each master is known to have.
type replicaSync struct {
	// replicas is the number asked for, or MajorityOfReplicas.
	replicas int
	timeout  time.Duration

	mu sync.Mutex
	// counts is the number of online replicas of each master: key "" for a single-master client, the
	// node address on Redis Cluster.
	counts map[string]int
	// checked is when the reading that gave counts started; counts read before invalidated are stale.
	checked, invalidated time.Time
	// reading is the reading of the counts in progress, nil when none is: one at a time, and every
	// caller that needs a count read after a given moment waits for a reading that started after it.
	reading *countReading
	// replIDs is the replication id of each master at the last reading: a new one (a failover, a
	// restart) means a server that does not have our scripts.
	replIDs map[string]string
	// loaded holds, per master, the SHA1 of the scripts known to be in its script cache: the others
	// are sent with EVAL, so that a WAIT never follows a script that did not run (NOSCRIPT).
	loaded map[string]map[string]struct{}
	// unsupported is set once WAIT answered an error: the server (or a proxy in front of it) does not
	// offer it, and holds are not checked any more.
	unsupported atomic.Bool
}

// countReading is one reading of the replica counts; done is closed when it has finished.
type countReading struct {
	started time.Time
	done    chan struct{}
}

// SetReplicaSync makes every script that gives a lock to an owner (plain, fair, read and write
// acquires, and releases that hand the lock to a next owner) be followed by WAIT on the same
// connection, in the same pipeline, asking for acknowledgements from replicas replicas of the master
// (at most as many as are attached to it), or from a majority of those attached when replicas is
// [MajorityOfReplicas], within timeout. When fewer replicas acknowledge, exactly the hold the script
// gave is released again (retry-safe, with its own release request id) and the call fails with an
// error that matches [ErrNotSynced]; a release that handed the lock off reports it in
// [Released.NotSynced] instead, since the release itself stands.
//
// The number of replicas is read with INFO replication (replicas whose state is online, whatever
// offset they have acknowledged) on first use, every [ReplicaRefreshInterval], and at once after a
// connection error, a short WAIT or a NOSCRIPT answer; a call whose WAIT came back short compares
// against a count read after its WAIT (one reading at a time, shared by every caller that waits for
// it). No WAIT is sent while a master has no replica, on a client that is neither a *redis.Client
// (single server or Sentinel) nor a *redis.ClusterClient, when INFO does not report replicas
// (miniredis), and after WAIT answered an error once. A script the master is not known to have (its
// first use there, or after a failover or a restart) goes with EVAL rather than EVALSHA, so that the
// WAIT never waits after a script that did not run. On Redis Cluster the script and WAIT go in one
// pipeline to the master of the lock's slot. The client's ReadTimeout (go-redis' default is 5s) bounds
// the pipeline's reply: a timeout of at least it is cut to three quarters of it.
//
// Renewals ([Ops.Renew], [Ops.ReadRenew], [Ops.WriteRenew]) are followed by WAIT as well; one that
// too few replicas acknowledge is not undone, and answers [ErrRenewalNotSynced].
//
// replicas 0 turns the safeguard off, as does never calling SetReplicaSync. replicas must be
// positive, 0 or [MajorityOfReplicas], and timeout must be positive, or SetReplicaSync panics: the
// callers check their input first. It must be called before o is used.
func (o *Ops) SetReplicaSync(replicas int, timeout time.Duration) {
	if (replicas < 0 && replicas != MajorityOfReplicas) || timeout <= 0 {
		panic(fmt.Sprintf("redisops: SetReplicaSync(%d, %v): replicas must be positive, 0 or MajorityOfReplicas, and timeout must be positive", replicas, timeout))
	}
	if replicas == 0 {
		o.sync = nil
		return
	}
	o.sync = &replicaSync{replicas: replicas, timeout: timeout}
}

// grant says how to give back the hold that a script call may give to an owner.
type grant struct {
	// granted reports, from the script's reply, whether the call gave a hold.
	granted func(reply *redis.Cmd) bool
	// undo releases exactly that hold.
	undo func(ctx context.Context) error
}

// runScript runs script like [redis.Script.Run]; with g not nil it is a call that may give a hold, run
// as runGranting runs it.
func (o *Ops) runScript(ctx context.Context, g *grant, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	c := call{script: script, keys: keys, args: args}
	if g == nil {
		return o.run(ctx, c), nil
	}
	return o.runGranting(ctx, c, *g)
}

// runCommandScript is runScript for a call whose EVALSHA command is given whole (evalshaCommand):
// without a grant it is sent whole; with one, it goes the replica-sync way (runSynced takes its keys
// and arguments apart).
func (o *Ops) runCommandScript(ctx context.Context, g *grant, script *redis.Script, command []any) (*redis.Cmd, error) {
	if g == nil {
		return o.run(ctx, call{script: script, command: command}), nil
	}
	return o.runGranting(ctx, call{script: script, command: command}, *g)
}

// undoPlain gives back a hold that [Ops.Acquire] gave owner: one release, so a re-entry drops back to
// the count it had.
func (o *Ops) undoPlain(name, owner string, lease time.Duration) *grant {
	return &grant{granted: grantedFirst, undo: func(ctx context.Context) error {
		_, err := o.Release(ctx, name, owner, undoRequestID(), lease, nil)
		return err
	}}
}

// undoHandoff gives back the hold that [Ops.Release] handed off to next; nil when next is nil, and
// when next's owner was let in before the release (next.Token): giving its hold back would free a lock
// it is using, so such a release is not waited for.
func (o *Ops) undoHandoff(name string, next *Handoff) *grant {
	if next == nil || next.Token != 0 {
		return nil
	}
	return &grant{granted: grantedHandoff, undo: func(ctx context.Context) error {
		_, err := o.Release(ctx, name, next.Owner, undoRequestID(), next.Lease, nil)
		return err
	}}
}

// undoFair gives back a hold that [Ops.FairAcquire] gave owner.
func (o *Ops) undoFair(name, owner string, lease time.Duration) *grant {
	return &grant{granted: grantedFirst, undo: func(ctx context.Context) error {
		_, err := o.FairRelease(ctx, name, owner, undoRequestID(), lease, nil)
		return err
	}}
}

// undoFairHandoff gives back the hold that [Ops.FairRelease] handed off to next; nil when next is nil.
func (o *Ops) undoFairHandoff(name string, next *Handoff) *grant {
	if next == nil {
		return nil
	}
	return &grant{granted: grantedHandoff, undo: func(ctx context.Context) error {
		_, err := o.FairRelease(ctx, name, next.Owner, undoRequestID(), next.Lease, nil)
		return err
	}}
}

// undoRead gives back the read hold that [Ops.ReadAcquire] gave owner: its latest one.
func (o *Ops) undoRead(name, owner string, lease time.Duration) *grant {
	return &grant{granted: grantedFirst, undo: func(ctx context.Context) error {
		_, err := o.ReadRelease(ctx, name, owner, undoRequestID(), lease)
		return err
	}}
}

// undoWrite gives back a write hold that [Ops.WriteAcquire] gave owner.
func (o *Ops) undoWrite(name, owner string, lease time.Duration) *grant {
	return &grant{granted: grantedFirst, undo: func(ctx context.Context) error {
		_, err := o.WriteRelease(ctx, name, owner, undoRequestID(), lease)
		return err
	}}
}

// syncsGrants reports whether a call on key that gives a hold would now be followed by WAIT. When the
// target cannot be found it answers true: the caller then takes the cautious path.
func (o *Ops) syncsGrants(ctx context.Context, key string) bool {
	rs := o.sync
	if rs == nil || rs.unsupported.Load() {
		return false
	}
	t, ok, err := o.syncTarget(ctx, key)
	switch {
	case err != nil:
		return true
	case !ok:
		return false
	}
	return rs.want(ctx, o.client, t.master) > 0
}

// undoRequestID returns a fresh release request id for an undo, so that go-redis' retries of the undo
// release it only once.
func undoRequestID() string { return "lockwarden-unsynced:" + uuid.NewString() }

// replyInts returns the reply's elements as int64s where they are integers.
func replyInts(reply *redis.Cmd) []int64 {
	vals, err := reply.Slice()
	if err != nil {
		return nil
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		out[i], _ = v.(int64)
	}
	return out
}

// grantedFirst is the granted test of the acquire scripts: their reply starts with 1 when they gave a
// hold.
func grantedFirst(reply *redis.Cmd) bool {
	vals := replyInts(reply)
	return len(vals) > 0 && vals[0] == 1
}

// grantedHandoff is the granted test of the release scripts: their second element is the next owner's
// fencing token when they handed the lock off.
func grantedHandoff(reply *redis.Cmd) bool {
	vals := replyInts(reply)
	return len(vals) > 1 && vals[0] >= 0 && vals[1] > 0
}

// target is where a synced call goes: a client whose pipeline holds one connection, and the key of its
// master in replicaSync.counts.
type target struct {
	pipe   pipeliner
	master string
	opts   *redis.Options
}

// syncTarget returns the target of a call on key, or ok false when the client cannot WAIT on the
// connection of the script.
func (o *Ops) syncTarget(ctx context.Context, key string) (t target, ok bool, err error) {
	switch c := o.client.(type) {
	case *redis.Client:
		return target{pipe: c, opts: c.Options()}, true, nil
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return target{}, false, err
		}
		return target{pipe: node, master: node.Options().Addr, opts: node.Options()}, true, nil
	default:
		return target{}, false, nil
	}
}

// runGranting runs c, a call that may give a hold, followed by WAIT when the replica-sync safeguard
// asks for it. syncErr is not nil when the script gave a hold that fewer replicas than required
// acknowledged: the hold was then given back, and syncErr matches [ErrNotSynced].
func (o *Ops) runGranting(ctx context.Context, c call, g grant) (reply *redis.Cmd, syncErr error) {
	c.grant = &g
	replies, syncErrs, ok := o.runSynced(ctx, []call{c})
	if !ok {
		return o.run(ctx, c), nil
	}
	return replies[0], syncErrs[0]
}

// runSynced runs calls, all on keys of one lock, in one pipeline on one connection, followed by WAIT
// when one of them may give a hold and the master has replicas to wait for. It returns each call's
// reply and, for a call that gave a hold replicas did not acknowledge, an error matching
// [ErrNotSynced] after giving that hold back. It reports ok false, having run nothing, when no WAIT is
// wanted: the caller then runs the calls its usual way. Calls given as a whole EVALSHA command are
// taken apart into keys and arguments here (withKeys); calls is not changed.
func (o *Ops) runSynced(ctx context.Context, calls []call) (replies []*redis.Cmd, syncErrs []error, ok bool) {
	rs := o.sync
	if rs == nil || rs.unsupported.Load() || len(calls) == 0 ||
		!slices.ContainsFunc(calls, func(c call) bool { return c.grant != nil }) {
		return nil, nil, false
	}
	if slices.ContainsFunc(calls, func(c call) bool { return c.command != nil }) {
		apart := make([]call, len(calls))
		for i, c := range calls {
			apart[i] = c.withKeys()
		}
		calls = apart
	}
	if len(calls[0].keys) == 0 {
		return nil, nil, false
	}
	t, ok, err := o.syncTarget(ctx, calls[0].keys[0])
	if err != nil {
		replies, syncErrs = make([]*redis.Cmd, len(calls)), make([]error, len(calls))
		for i := range replies {
			replies[i] = redis.NewCmd(ctx)
			replies[i].SetErr(err)
		}
		return replies, syncErrs, true
	}
	if !ok {
		return nil, nil, false
	}
	want := rs.want(ctx, o.client, t.master)
	if want == 0 {
		return nil, nil, false
	}
	replies, syncErrs = make([]*redis.Cmd, len(calls)), make([]error, len(calls))
	timeout := rs.waitTimeout(t.opts)
	// A script the master is not known to have goes with EVAL, which loads it. One that meets a server
	// that lost its scripts all the same (a restart, a failover, SCRIPT FLUSH) did not run: it goes
	// again with EVAL, after the replica counts are read again (the server may be another one), and
	// WAIT follows again, since the script ran only then.
	waits, wants := make([]*redis.Cmd, len(calls)), make([]int, len(calls))
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	for round := 0; len(todo) > 0; round++ {
		if want == 0 {
			for _, i := range todo {
				replies[i], waits[i] = o.run(ctx, calls[i]), nil
			}
			break
		}
		wait, again := o.pipeWithWait(ctx, t, calls, todo, round > 0, want, timeout, replies)
		if acked, err := wait.Int64(); err == nil && acked < int64(want) {
			// Whether or not a script gave a hold, the master has fewer replicas in step than
			// counted (a failover, a replica gone): the next call reads the counts again rather
			// than waiting a whole timeout on the old ones.
			rs.markStale()
		}
		for _, i := range todo {
			waits[i], wants[i] = wait, want
		}
		if todo = again; len(todo) == 0 || round > 0 {
			break
		}
		rs.forgetScripts()
		rs.markStale()
		want = rs.wantAfter(ctx, o.client, t.master, time.Now())
	}
	for i, c := range calls {
		if waits[i] == nil {
			continue // run without WAIT: the master has no replica now
		}
		syncErrs[i] = o.checkSynced(ctx, c, replies[i], waits[i], t.master, wants[i], timeout)
	}
	return replies, syncErrs, true
}

// pipeWithWait runs the calls of todo in one pipeline on t, followed by WAIT for want replicas within
// timeout, and stores their replies in replies. A call goes with EVAL when eval is set or the master is
// not known to have its script, with EVALSHA otherwise. It returns the WAIT's reply and the calls
// that met NOSCRIPT (they did not run); a script that ran is recorded as loaded on the master.
func (o *Ops) pipeWithWait(ctx context.Context, t target, calls []call, todo []int, eval bool, want int,
	timeout time.Duration, replies []*redis.Cmd) (wait *redis.Cmd, noScript []int) {
	rs := o.sync
	pipe := t.pipe.Pipeline()
	for _, i := range todo {
		c := calls[i]
		if eval || !rs.isLoaded(t.master, c.script.Hash()) {
			replies[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
		} else {
			replies[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
	}
	wait = pipe.Do(ctx, "wait", want, timeout.Milliseconds())
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	for _, i := range todo {
		switch err := replies[i].Err(); {
		case err != nil && isNoScript(err):
			noScript = append(noScript, i)
		case scriptRan(err):
			rs.setLoaded(t.master, calls[i].script.Hash())
		}
	}
	return wait, noScript
}

// checkSynced looks at the reply of the call c and at the WAIT that followed it, and gives the hold
// back when c gave one that fewer than want replicas acknowledged; the error then matches
// [ErrNotSynced], and also [ErrReplicasChanged] when the replica counts, read again after the WAIT
// answered, are lower than want.
func (o *Ops) checkSynced(ctx context.Context, c call, reply, wait *redis.Cmd, master string, want int, timeout time.Duration) error {
	rs := o.sync
	if err := reply.Err(); err != nil {
		o.noteCallError(ctx, err)
		return nil
	}
	if c.grant == nil || !c.grant.granted(reply) {
		return nil
	}
	acked, enough, err := rs.acknowledged(wait, want)
	if enough {
		return nil
	}
	// Read the counts again, in a reading that starts after this WAIT answered: after a failover the
	// new master may have fewer replicas than the WAIT asked for. The hold is given back all the same,
	// since the count may come from another node than the one that gave it; the caller may try again
	// against the new count.
	answered := time.Now()
	rs.markStale()
	changed := err == nil && rs.wantAfter(ctx, o.client, master, answered) < want
	why := fmt.Sprintf("%d of %d replicas acknowledged within %v", acked, want, timeout)
	if err != nil {
		why = fmt.Sprintf("WAIT for %d replicas failed: %v", want, err)
	}
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	if uerr := c.grant.undo(undoCtx); uerr != nil && !errors.Is(uerr, ErrNotHeld) {
		return fmt.Errorf("%w: %s; giving the hold back failed, it lasts until its lease runs out: %w",
			ErrNotSynced, why, uerr)
	}
	if changed {
		return fmt.Errorf("%w (%w): %s; the hold was given back", ErrNotSynced, ErrReplicasChanged, why)
	}
	return fmt.Errorf("%w: %s; the hold was given back", ErrNotSynced, why)
}

// noteCallError takes the error of a script call made beside a WAIT: a connection error (not the
// caller leaving) may mean a failover, so the scripts known to the masters are forgotten and the
// replica counts read again; a Cluster redirection reloads the slot map.
func (o *Ops) noteCallError(ctx context.Context, err error) {
	if !isErrorReply(err) && !callerGone(err) {
		o.sync.forgetScripts()
		o.sync.markStale()
	}
	if cc, ok := o.client.(*redis.ClusterClient); ok && isRedirect(err) {
		cc.ReloadState(ctx)
	}
}

// acknowledged reads the reply of a WAIT for want replicas. enough reports that nothing more is to be
// done: want replicas acknowledged, or the server does not offer WAIT (an error reply), in which case
// the safeguard is given up rather than fail every call. Otherwise acked and err say what came back.
func (rs *replicaSync) acknowledged(wait *redis.Cmd, want int) (acked int64, enough bool, err error) {
	acked, err = wait.Int64()
	switch {
	case err != nil && isErrorReply(err):
		rs.unsupported.Store(true)
		return acked, true, err
	case err == nil && acked >= int64(want):
		return acked, true, nil
	}
	return acked, false, err
}

// want returns how many replicas of master a new hold must reach: the configured number, at most as
// many as are attached, or a majority of those attached; 0 when there are none. It reads the counts
// again when they were invalidated (markStale), when master is not known, or when they are older than
// ReplicaRefreshInterval. In the first two cases it waits for a reading that started after the
// invalidation, sharing one reading with every caller that needs it; when they are only old, it reads
// them unless a reading is already under way, and then uses them as they are. When ctx ends first it
// answers from the counts it has.
func (rs *replicaSync) want(ctx context.Context, client redis.Scripter, master string) int {
	return rs.wantAfter(ctx, client, master, time.Time{})
}

// wantAfter is want, with counts read by a reading that started after after (unless ctx ends first).
func (rs *replicaSync) wantAfter(ctx context.Context, client redis.Scripter, master string, after time.Time) int {
	rs.mu.Lock()
	_, known := rs.counts[master]
	need := rs.invalidated
	if after.After(need) {
		need = after
	}
	if !known {
		need = time.Now()
	}
	mustWait := !rs.checked.After(need) || !known || rs.checked.IsZero()
	if !mustWait && time.Since(rs.checked) >= ReplicaRefreshInterval && rs.reading == nil {
		mustWait, need = true, time.Now() // only old: this caller reads them, the others go on
	}
	for mustWait {
		r := rs.reading
		if r == nil {
			r = &countReading{started: time.Now(), done: make(chan struct{})}
			rs.reading = r
			rs.mu.Unlock()
			rs.refresh(ctx, client, r)
			rs.mu.Lock()
			break
		}
		rs.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
		}
		rs.mu.Lock()
		if ctx.Err() != nil || !r.started.Before(need) {
			break // a reading that started late enough, or the caller gave up
		}
	}
	defer rs.mu.Unlock()
	return rs.of(rs.counts[master])
}

// of returns how many of attached replicas a new hold must reach.
func (rs *replicaSync) of(attached int) int {
	if rs.replicas == MajorityOfReplicas {
		if attached == 0 {
			return 0
		}
		return attached/2 + 1
	}
	return min(rs.replicas, attached)
}

// refresh carries out the reading r of the number of online replicas of every master of client. A
// master whose INFO fails with a connection error keeps its count and the counts stay invalidated, so
// the next call reads them again; one whose INFO answers without replicas, or with an error reply,
// counts 0. A master whose replication id changed forgets which scripts it has.
func (rs *replicaSync) refresh(ctx context.Context, client redis.Scripter, r *countReading) {
	// The reading is shared: a caller that leaves must not cut it short for the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	counts, ids := make(map[string]int), make(map[string]string)
	failed := false
	count := func(ctx context.Context, c *redis.Client, master string) {
		info, err := c.Info(ctx, "replication").Result()
		switch {
		case err == nil:
			counts[master], ids[master] = parseReplication(info)
		case isErrorReply(err):
			counts[master] = 0
		default:
			failed = true
		}
	}
	switch c := client.(type) {
	case *redis.Client:
		count(ctx, c, "")
	case *redis.ClusterClient:
		var mu sync.Mutex
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			count(ctx, node, node.Options().Addr)
			return nil
		})
		failed = failed || err != nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for master, n := range rs.counts {
		if _, ok := counts[master]; !ok && failed {
			counts[master] = n
		}
	}
	for master, id := range ids {
		if old, ok := rs.replIDs[master]; ok && old != id {
			delete(rs.loaded, master)
		}
	}
	if rs.replIDs == nil {
		rs.replIDs = make(map[string]string)
	}
	maps.Copy(rs.replIDs, ids)
	rs.counts, rs.checked = counts, r.started
	if failed {
		rs.invalidated = time.Now()
	}
	rs.reading = nil
	close(r.done)
}

// markStale makes the next call read the replica counts again.
func (rs *replicaSync) markStale() {
	rs.mu.Lock()
	rs.invalidated = time.Now()
	rs.mu.Unlock()
}

// isLoaded reports whether master is known to have the script whose SHA1 is sha.
func (rs *replicaSync) isLoaded(master, sha string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	_, ok := rs.loaded[master][sha]
	return ok
}

// setLoaded records that master has the script whose SHA1 is sha.
func (rs *replicaSync) setLoaded(master, sha string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.loaded == nil {
		rs.loaded = make(map[string]map[string]struct{})
	}
	if rs.loaded[master] == nil {
		rs.loaded[master] = make(map[string]struct{})
	}
	rs.loaded[master][sha] = struct{}{}
}

// forgetScripts forgets which scripts every master has: after a connection error or a NOSCRIPT answer
// the server may be another one (a failover) or a restarted one.
func (rs *replicaSync) forgetScripts() {
	rs.mu.Lock()
	rs.loaded = nil
	rs.mu.Unlock()
}

// waitTimeout is the WAIT timeout for a client with options opts: the configured one, cut to three
// quarters of the client's ReadTimeout when it is not below it, so that the pipeline's reply is read
// before the connection times out.
func (rs *replicaSync) waitTimeout(opts *redis.Options) time.Duration {
	if opts != nil && opts.ReadTimeout > 0 && rs.timeout >= opts.ReadTimeout {
		return max(opts.ReadTimeout*3/4, time.Millisecond)
	}
	return rs.timeout
}

// renewalWaitTimeout is waitTimeout for renewals bounded by ctx: when the client honours context
// deadlines, it is also cut to three quarters of the time left before ctx's (renewals are bounded by
// the stop release timeout, which may be shorter than the sync timeout), so that a lagging replica
// still reads as ErrRenewalNotSynced, which gives the renewal back, rather than as a timeout. An
// acquisition is not cut so: a WAIT cut short would fail a Lock as not synced where it would have
// been retried.
func (rs *replicaSync) renewalWaitTimeout(ctx context.Context, opts *redis.Options) time.Duration {
	timeout := rs.waitTimeout(opts)
	if opts != nil && opts.ContextTimeoutEnabled {
		if d, ok := ctx.Deadline(); ok {
			if left := time.Until(d) * 3 / 4; left < timeout {
				timeout = max(left, time.Millisecond)
			}
		}
	}
	return timeout
}

// parseReplication reads the text of INFO replication: the number of replicas whose state is online
// (or connected_slaves when no replica line says its state), and the master's replication id. A
// replica counts whatever offset it has acknowledged: offset 0 is also that of a replica in sync with
// a master that has written nothing yet, and one still loading what a full sync sent it has not got
// the lock either, so the WAIT must wait for it.
func parseReplication(info string) (replicas int, replID string) {
	online, connected, stated := 0, 0, false
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case key == "connected_slaves":
			connected, _ = strconv.Atoi(val)
		case key == "master_replid":
			replID = val
		case strings.HasPrefix(key, "slave") && strings.Contains(val, "state="):
			stated = true
			if strings.Contains(","+val+",", ",state=online,") {
				online++
			}
		}
	}
	if stated {
		return online, replID
	}
	return connected, replID
}

// scriptRan reports whether err, the error of an EVAL or EVALSHA (nil when it succeeded), shows that
// the script ran, and so is in the server's script cache: no error, or an error the script raised
// (WRONGTYPE, WRONGKIND, or Redis' "ERR ... script" of a Lua error). The refusals that come before
// a script runs (MOVED, ASK, READONLY, LOADING, BUSY, NOPERM, OOM, ...) do not.
func scriptRan(err error) bool {
	if err == nil {
		return true
	}
	if !isErrorReply(err) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "WRONGTYPE ") || strings.HasPrefix(msg, "WRONGKIND ") ||
		(strings.HasPrefix(msg, "ERR ") && strings.Contains(strings.ToLower(msg), "script"))
}

// isNoScript reports whether err is Redis' answer to EVALSHA of a script it does not have.
func isNoScript(err error) bool {
	return strings.HasPrefix(err.Error(), "NOSCRIPT") || redis.HasErrorPrefix(err, "NOSCRIPT")
}

// isErrorReply reports whether err is an error reply from the server, as opposed to a connection
// error or an ended context.
func isErrorReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!strings.HasPrefix(err.Error(), "redis: ")
}

// callerGone reports whether err, the error of a call, comes from the caller's context ending
// (canceled, or past its deadline) rather than from the server or the connection: it says nothing of
// the server, so the scripts it is known to have and its replica count stand. Only the error counts: a
// connection error says the server may have changed even when the context has ended meanwhile.
func callerGone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// isRedirect reports whether err is a Redis Cluster redirection.
func isRedirect(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ")
}
