package redisops

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	// DefaultSyncReplicas is how many replicas must acknowledge a new hold by default: at least one,
	// which is Redisson's rule (checkLockSyncedSlaves fails a lock only when no replica has it).
	DefaultSyncReplicas = 1
	// DefaultSyncTimeout is how long a new hold waits for replicas by default: Redisson's
	// slavesSyncTimeout.
	DefaultSyncTimeout = time.Second
	// ReplicaRefreshInterval is how often the number of replicas attached to a master is read again
	// (INFO replication). It is also read again at once after a connection error or a WAIT that came
	// back short, so a failover or a replica that went away is noticed at the next call.
	ReplicaRefreshInterval = 5 * time.Second
	// undoTimeout bounds the release that gives back a hold that replicas did not acknowledge, whatever
	// is left of the caller's context: that hold must not linger for a whole lease.
	undoTimeout = 2 * time.Second
)

// replicaSync is the replica-sync safeguard of an [Ops]: WAIT after every script that gives a lock to an
// owner, on the connection of the script. It keeps the number of replicas attached to each master.
type replicaSync struct {
	replicas int
	timeout  time.Duration

	// refreshing lets one caller at a time read the replica counts again; the others use the counts
	// they find.
	refreshing sync.Mutex
	mu         sync.Mutex
	// counts is the number of online replicas of each master: key "" for a single-master client, the
	// node address on Redis Cluster.
	counts  map[string]int
	checked time.Time
	stale   bool
	// unsupported is set once WAIT answered an error: the server (or a proxy in front of it) does not
	// offer it, and holds are not checked any more.
	unsupported atomic.Bool
}

// SetReplicaSync makes every script that gives a lock to an owner (plain, fair, read and write
// acquires, and releases that hand the lock to a next owner) be followed by WAIT on the same
// connection, in the same pipeline, asking for min(replicas, replicas attached to the master)
// acknowledgements within timeout. When fewer replicas acknowledge, exactly the hold the script gave is
// released again (retry-safe, with its own release request id) and the call fails with an error that
// matches [ErrNotSynced]; a release that handed the lock off reports it in [Released.NotSynced] instead,
// since the release itself stands.
//
// The number of replicas is read with INFO replication (replicas whose state is online) on first use,
// every [ReplicaRefreshInterval], and at once after a connection error or a short WAIT. No WAIT is sent
// while a master has no replica, on a client that is neither a *redis.Client (single server or
// Sentinel) nor a *redis.ClusterClient, when INFO does not report replicas (miniredis), and after WAIT
// answered an error once. On Redis Cluster the script and WAIT go in one pipeline to the master of the
// lock's slot. The client's ReadTimeout bounds the pipeline's reply: a timeout of at least it is cut to
// three quarters of it.
//
// Renewals ([Ops.Renew], [Ops.ReadRenew], [Ops.WriteRenew]) are followed by WAIT as well; one that
// too few replicas acknowledge is not undone, and answers [ErrRenewalNotSynced].
//
// replicas 0 turns the safeguard off, as does never calling SetReplicaSync. replicas must not be
// negative and timeout must be positive, or SetReplicaSync panics. It must be called before o is used.
func (o *Ops) SetReplicaSync(replicas int, timeout time.Duration) {
	if replicas < 0 || timeout <= 0 {
		panic(fmt.Sprintf("redisops: SetReplicaSync(%d, %v): replicas must not be negative and timeout must be positive", replicas, timeout))
	}
	if replicas == 0 {
		o.sync = nil
		return
	}
	o.sync = &replicaSync{replicas: replicas, timeout: timeout, stale: true}
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

// undoPlain gives back a hold that [Ops.Acquire] gave owner: one release, so a re-entry drops back to
// the count it had.
func (o *Ops) undoPlain(name, owner string, lease time.Duration) *grant {
	return &grant{granted: grantedFirst, undo: func(ctx context.Context) error {
		_, err := o.Release(ctx, name, owner, undoRequestID(), lease, nil)
		return err
	}}
}

// undoHandoff gives back the hold that [Ops.Release] handed off to next; nil when next is nil.
func (o *Ops) undoHandoff(name string, next *Handoff) *grant {
	if next == nil {
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
// wanted: the caller then runs the calls its usual way.
func (o *Ops) runSynced(ctx context.Context, calls []call) (replies []*redis.Cmd, syncErrs []error, ok bool) {
	rs := o.sync
	if rs == nil || rs.unsupported.Load() || len(calls) == 0 || len(calls[0].keys) == 0 ||
		!slices.ContainsFunc(calls, func(c call) bool { return c.grant != nil }) {
		return nil, nil, false
	}
	t, ok, err := o.syncTarget(ctx, calls[0].keys[0])
	replies, syncErrs = make([]*redis.Cmd, len(calls)), make([]error, len(calls))
	if err != nil {
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
	timeout := rs.waitTimeout(t.opts)
	// A call that meets a server that lost its scripts (a restart, SCRIPT FLUSH) goes again with EVAL,
	// which loads the script; WAIT follows again, since the script ran only then.
	waits := make([]*redis.Cmd, len(calls))
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	for _, eval := range []bool{false, true} {
		pipe := t.pipe.Pipeline()
		for _, i := range todo {
			c := calls[i]
			if eval {
				replies[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
			} else {
				replies[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
			}
		}
		wait := pipe.Do(ctx, "wait", want, timeout.Milliseconds())
		_, _ = pipe.Exec(ctx) // each command keeps its own error
		var again []int
		for _, i := range todo {
			waits[i] = wait
			if err := replies[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
				again = append(again, i)
			}
		}
		if todo = again; len(todo) == 0 {
			break
		}
	}
	for i, c := range calls {
		syncErrs[i] = o.checkSynced(ctx, c, replies[i], waits[i], t.master, want, timeout)
	}
	return replies, syncErrs, true
}

// checkSynced looks at the reply of the call c and at the WAIT that followed it, and gives the hold
// back when c gave one that fewer than want replicas acknowledged; the error then matches
// [ErrNotSynced], and also [ErrReplicasChanged] when the replica counts, read again at once, are lower
// than want.
func (o *Ops) checkSynced(ctx context.Context, c call, reply, wait *redis.Cmd, master string, want int, timeout time.Duration) error {
	rs := o.sync
	if err := reply.Err(); err != nil {
		if !isErrorReply(err) {
			rs.markStale() // perhaps a failover: the replicas may have changed
		}
		if cc, ok := o.client.(*redis.ClusterClient); ok && isRedirect(err) {
			cc.ReloadState(ctx)
		}
		return nil
	}
	if c.grant == nil || !c.grant.granted(reply) {
		return nil
	}
	acked, err := wait.Int64()
	switch {
	case err != nil && isErrorReply(err):
		// WAIT is not offered here: give the safeguard up rather than fail every lock.
		rs.unsupported.Store(true)
		return nil
	case err == nil && acked >= int64(want):
		return nil
	}
	rs.markStale()
	// Read the counts again: after a failover the new master may have fewer replicas than the WAIT
	// asked for. The hold is given back all the same, since the count may come from another node than
	// the one that gave it; the caller may try again against the new count.
	changed := err == nil && rs.want(ctx, o.client, master) < want
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

// want returns how many replicas of master a new hold must reach: min(configured, attached), 0 when
// there are none. It reads the counts again when they are stale or older than ReplicaRefreshInterval.
func (rs *replicaSync) want(ctx context.Context, client redis.Scripter, master string) int {
	rs.mu.Lock()
	due := rs.stale || time.Since(rs.checked) >= ReplicaRefreshInterval
	if _, known := rs.counts[master]; !known && !due {
		due = true // a master we have not seen, as after a Cluster resharding
	}
	rs.mu.Unlock()
	if due && rs.refreshing.TryLock() {
		rs.refresh(ctx, client)
		rs.refreshing.Unlock()
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return min(rs.replicas, rs.counts[master])
}

// refresh reads the number of online replicas of every master of client. A master whose INFO fails
// with a connection error keeps its count and the counts stay stale, so the next call tries again; one
// whose INFO answers without replicas, or with an error reply, counts 0.
func (rs *replicaSync) refresh(ctx context.Context, client redis.Scripter) {
	counts := make(map[string]int)
	failed := false
	count := func(ctx context.Context, c *redis.Client, master string) {
		info, err := c.Info(ctx, "replication").Result()
		switch {
		case err == nil:
			counts[master] = onlineReplicas(info)
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
	rs.counts, rs.checked, rs.stale = counts, time.Now(), failed
}

func (rs *replicaSync) markStale() {
	rs.mu.Lock()
	rs.stale = true
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

// onlineReplicas counts the replicas in the text of INFO replication whose state is online and that
// have acknowledged an offset, or returns connected_slaves when no replica line says its state. A
// replica that has acknowledged nothing yet (offset 0) is still loading what a full sync sent it,
// although the master already calls it online: it would answer no WAIT for up to a second.
func onlineReplicas(info string) int {
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
		case strings.HasPrefix(key, "slave") && strings.Contains(val, "state="):
			stated = true
			if strings.Contains(","+val+",", ",state=online,") && !strings.Contains(","+val+",", ",offset=0,") {
				online++
			}
		}
	}
	if stated {
		return online
	}
	return connected
}

// isErrorReply reports whether err is an error reply from the server, as opposed to a connection
// error or an ended context.
func isErrorReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!strings.HasPrefix(err.Error(), "redis: ")
}

// isRedirect reports whether err is a Redis Cluster redirection.
func isRedirect(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "MOVED ") || strings.HasPrefix(s, "ASK ")
}
