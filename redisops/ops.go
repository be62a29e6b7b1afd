package redisops

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotHeld is returned when the owner does not hold the lock: it never took it, already released it,
// or its lease ran out. It is the one translation of a script's "not owner" answer.
var ErrNotHeld = errors.New("lockwarden: lock not held by this owner")

// ErrStaleRelease is returned by [Ops.ReleaseHeld] and [Ops.ReadReleaseHeld] when a release of the
// owner with a higher sequence number has already run: the call is a late copy of an older release
// (sent again after its reply was lost, and delivered after the owner went on), and changed nothing. A
// caller that sequences its releases never sees it otherwise.
var ErrStaleRelease = errors.New("lockwarden: a later release of this owner has already run")

// ErrWrongType is returned when a key of the lock holds another type of data than the lock keeps there:
// most likely another lock's internal key, taken as a lock name (a lock named
// "redisson_lock_token:{X}" is X's token counter), or data of the application. The script then changed
// nothing.
var ErrWrongType = errors.New("lockwarden: a key of the lock holds data of another type")

// ErrKindMismatch is returned when the owner holds the lock as another kind than the call is for: a
// plain or fair call on a name where the owner has read holds of a read-write lock, or a read-write
// call where it has a plain or fair hold (the families share the hash at the lock's name). The script
// then changed nothing.
var ErrKindMismatch = errors.New("lockwarden: the owner holds the lock as another kind of lock")

// DefaultLatchExpiry is how long a release answer is kept for retries of the same request, and for
// telling late copies of an owner's sequenced releases from new ones ([Ops.ReleaseHeld]). It covers
// go-redis' own retries of a command whose reply was lost, and keeps the number of latch keys small:
// one per lock name and owner that released it in the last 10 s, and one per release of an owner id
// whose count is not known.
const DefaultLatchExpiry = 10 * time.Second

var (
	//go:embed acquire.lua
	acquireSource string
	//go:embed release.lua
	releaseSource string
	//go:embed release_fenced.lua
	releaseFencedSource string
	//go:embed renew.lua
	renewSource string
	//go:embed forceunlock.lua
	forceUnlockSource string
	//go:embed status.lua
	statusSource string

	acquireScript     = redis.NewScript(withLib(acquireSource))
	releaseScript     = redis.NewScript(withLib(releaseSource))
	releaseFenced     = redis.NewScript(withLib(releaseFencedSource))
	renewScript       = redis.NewScript(renewSource)
	forceUnlockScript = redis.NewScript(withLib(forceUnlockSource))
	statusScript      = redis.NewScript(statusSource)

	// acquireSHA, releaseSHA and releaseFencedSHA are the SHA1s of the scripts of every Lock and
	// Unlock, boxed once for evalshaCommand.
	acquireSHA, releaseSHA, releaseFencedSHA any = acquireScript.Hash(), releaseScript.Hash(), releaseFenced.Hash()
)

// Scripts returns every script of the package, so that tests and warm-up code can load them all. A
// caller that runs one of them itself passes every duration and count as a plain decimal integer, as
// the package does: the scripts hand those arguments to Redis commands as they came (a Lua number
// would cost Redis a printf on every command), and a command refuses "1e3" or "300.0".
func Scripts() map[string]*redis.Script {
	all := map[string]*redis.Script{
		"acquire":        acquireScript,
		"release":        releaseScript,
		"release_fenced": releaseFenced,
		"renew":          renewScript,
		"renew_many":     renewManyScript,
		"forceunlock":    forceUnlockScript,
		"status":         statusScript,
		"raise_token":    raiseTokenScript,
	}
	maps.Copy(all, FairScripts())
	maps.Copy(all, RWScripts())
	maps.Copy(all, SemaphoreScripts())
	maps.Copy(all, PermitsScripts())
	maps.Copy(all, LatchScripts())
	return all
}

// Ops runs the lock scripts against one Redis deployment. It is safe for concurrent use. Besides its
// settings it holds a [Batcher], through which every script call made on its own that is not followed
// by WAIT reaches Redis: the calls that many goroutines make at the same moment travel together, in
// one pipeline, so that they cost one round trip rather than one each, while a lone call goes at once,
// as a direct call would. Calls that come grouped ([Ops.RenewHolds], [Batch.Exec]) go as one pipeline
// straight on the client. It starts no goroutine.
type Ops struct {
	client      redis.Scripter
	batcher     *Batcher
	publish     string
	latchExpiry time.Duration
	// latchArg, publishArg and tokenMillisArg are millis(latchExpiry), publish and tokenMillis() as
	// script arguments, boxed once rather than on every call.
	latchArg, publishArg, tokenMillisArg any
	// deadlines is HonoursDeadlines.
	deadlines bool
	// tokenExpiry is how long a fencing-token counter outlives the clock passing its value; 0 keeps
	// it forever (see [Ops.SetTokenExpiry]).
	tokenExpiry time.Duration
	// sync is the replica-sync safeguard, nil when off (see [Ops.SetReplicaSync]).
	sync *replicaSync
	// cluster is set on Redis Cluster: the keys of one script call must then share a slot.
	cluster bool
	// lease is the last lease passed to leaseArg, with its argument boxed.
	lease atomic.Pointer[boxedMillis]
}

// boxedMillis is a duration and its script argument, millis of it, boxed.
type boxedMillis struct {
	d   time.Duration
	arg any
}

// leaseArg returns millis(d) as a script argument. Boxing an int64 above 255 allocates, so the last
// lease's argument is kept: the locks of a coordinator nearly always use one lease, its watchdog
// timeout.
func (o *Ops) leaseArg(d time.Duration) any {
	if b := o.lease.Load(); b != nil && b.d == d {
		return b.arg
	}
	b := &boxedMillis{d: d, arg: millis(d)}
	o.lease.Store(b)
	return b.arg
}

// int64s returns the integers of an array reply, as [redis.Cmd.Int64Slice] does, appended to buf:
// with a buf of the reply's length from the caller's stack, it allocates nothing.
func int64s(cmd *redis.Cmd, buf []int64) ([]int64, error) {
	v, err := cmd.Result()
	return int64sOf(v, err, buf)
}

// int64Of returns the integer of a reply's value and error, as [redis.Cmd.Int64] does.
func int64Of(v any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case string:
		return strconv.ParseInt(n, 10, 64)
	}
	return 0, fmt.Errorf("redis: unexpected type=%T for Int64", v)
}

// int64sOf is int64s of a reply's value and error.
func int64sOf(v any, err error, buf []int64) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redis: unexpected type=%T for []int64", v)
	}
	for _, e := range arr {
		switch n := e.(type) {
		case int64:
			buf = append(buf, n)
		case string:
			i, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return nil, err
			}
			buf = append(buf, i)
		default:
			return nil, fmt.Errorf("redis: unexpected type=%T for int64", e)
		}
	}
	return buf, nil
}

// New returns an Ops that runs scripts through client, publishing with PUBLISH, or with SPUBLISH when
// client is a *redis.ClusterClient (see [ShardedPubSub]).
func New(client redis.Scripter) *Ops {
	d, err := DeploymentOf(client)
	if err != nil {
		d = DeploymentSingle
	}
	return NewFor(client, d)
}

// NewFor returns an Ops that runs scripts through client, a client of the deployment d (see
// [DeploymentOf]): it publishes with SPUBLISH when d is sharded, and with PUBLISH otherwise.
func NewFor(client redis.Scripter, d Deployment) *Ops {
	o := &Ops{client: client, batcher: NewBatcher(client, DefaultPipelines), publish: publishCommand(d),
		latchExpiry: DefaultLatchExpiry, cluster: d == DeploymentCluster, deadlines: honoursDeadlines(client)}
	o.latchArg, o.publishArg = millis(o.latchExpiry), o.publish
	o.SetTokenExpiry(DefaultTokenExpiry)
	return o
}

// HonoursDeadlines reports whether o's client bounds a call by its context's deadline: a
// *redis.Client, *redis.ClusterClient or *redis.Ring with ContextTimeoutEnabled, or a client whose
// options o cannot read (taken to do so). Without it go-redis uses a deadline only while it waits for
// a connection of its pool.
func (o *Ops) HonoursDeadlines() bool { return o.deadlines }

// honoursDeadlines is HonoursDeadlines of client.
func honoursDeadlines(client redis.Scripter) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Acquired is the answer of [Ops.Acquire].
type Acquired struct {
	// OK reports whether the owner now holds the lock.
	OK bool
	// HoldCount is the owner's hold count after the call, when OK.
	HoldCount int64
	// Token is the fencing token of this acquisition, when OK.
	Token int64
	// TTL is the remaining lease of the current holder when not OK; -1 when the key has no expiry.
	TTL time.Duration
	// Watermark, when not OK (fair locks only), is at least every fencing token issued on the lock
	// before the call ran, and below every token issued after it: a fair grant notice whose token is
	// not above it is older than the call (see [Ops.FairWait]).
	Watermark int64
}

// UnknownHoldCount tells [Ops.Acquire] that the caller does not know the owner's hold count, as when an
// owner id is shared across processes.
const UnknownHoldCount = -1

// Acquire takes or re-enters the lock name for owner with the given lease. held is the hold count the
// owner had before this call as far as the caller knows, or [UnknownHoldCount]. With a known count the
// call is retry-safe: when go-redis retries it after a lost reply, the retry finds the owner's count
// already above held and takes no second hold. It answers a fresh fencing token for that hold: the
// hold found may also be a dead one of the owner's that the caller had counted as lost, whose token
// must not be handed out again.
//
// With the replica-sync safeguard on ([Ops.SetReplicaSync]), a hold that too few replicas acknowledge
// is given back and the call returns an error matching [ErrNotSynced].
func (o *Ops) Acquire(ctx context.Context, name, owner string, lease time.Duration, held int64) (Acquired, error) {
	n := NamesOf(name)
	return o.AcquireNamed(ctx, &n, owner, lease, held)
}

// AcquireNamed is [Ops.Acquire] on the lock of the names n.
func (o *Ops) AcquireNamed(ctx context.Context, n *Names, owner string, lease time.Duration, held int64) (Acquired, error) {
	name := n.Name
	var undo *grant
	if o.syncsGrants(ctx, name) { // else no WAIT follows, and the undo is never needed
		undo = o.undoPlain(name, owner, lease)
	}
	boxedName, token, _ := n.boxed()
	command := newCommand(acquireSHA, 2, boxedName, token, o.leaseArg(lease), owner, held, o.tokenArg())
	reply, syncErr := o.runCommandScript(ctx, undo, acquireScript, *command)
	var buf [3]int64
	vals, err := int64s(reply, buf[:0])
	freeCommand(command)
	if err == nil {
		err = syncErr
	}
	if err != nil {
		return Acquired{}, fmt.Errorf("lockwarden: acquire %q: %w", name, typed(err))
	}
	if len(vals) == 3 && vals[0] == 1 {
		return Acquired{OK: true, HoldCount: vals[1], Token: vals[2]}, nil
	}
	if len(vals) == 2 && vals[0] == 0 {
		return Acquired{TTL: ttlFromMillis(vals[1])}, nil
	}
	// A copy: vals is in buf, which stays on the stack only if nothing keeps it.
	return Acquired{}, fmt.Errorf("lockwarden: acquire %q: unexpected reply %v", name, slices.Clone(vals))
}

// Handoff names the owner that takes the lock in the same call when a release frees it.
type Handoff struct {
	// Owner is the owner id that gets the lock; empty means no handoff (the release publishes an
	// unlock notice).
	Owner string
	// Lease is the new hold's lease, rounded up to whole milliseconds (at least 1 ms).
	Lease time.Duration
	// OnlyIfAlone hands the lock off only if no other client is subscribed to the lock's channel
	// besides the caller's own subscription; otherwise the release publishes an unlock notice. The
	// fair lock ignores it: its queue already gives every waiter its turn.
	OnlyIfAlone bool
	// CountListeners, without OnlyIfAlone, hands the lock off all the same, and counts the clients
	// subscribed to the lock's channel as OnlyIfAlone would ([Released.Listeners]). The fair lock
	// ignores it.
	CountListeners bool
	// Token, when not 0, is the fencing token the caller has already given Owner, which it let in
	// before the release's answer: the lock's latest token plus one, which the counter kept unissued.
	// The release raises the token counter past it whatever happens (so that no later token equals it)
	// and hands the lock off to Owner with it; when the counter was already above it (a RedLock floor
	// raised it), it hands the lock off all the same (the
	// lock stays taken while Owner may use it) with a fresh token, and Released.Token tells the
	// caller, which then gives the hold back. Such a release is not followed by the replica-sync WAIT
	// and its undo. The fair lock ignores it.
	Token int64
	// WaitWindow is for fair locks only ([Ops.FairRelease]): the window by which the scores of the
	// waiters behind Owner move back when Owner takes the lock, as when a waiter wins
	// [Ops.FairAcquire]. It should be the waitWindow the waiters queue with; 0 moves no score.
	WaitWindow time.Duration
}

// Released is the answer of [Ops.Release].
type Released struct {
	// Remaining is the owner's hold count left; 0 means the lock was fully released.
	Remaining int64
	// HandedOff reports whether the lock went to the [Handoff] owner in the same call.
	HandedOff bool
	// Registered reports, for a fair lock's release, that the lock went to Next, a waiter registered
	// for handoffs with [Ops.FairWait], which was told so on its channel.
	Registered bool
	// Token is the new holder's fencing token, when HandedOff or Registered.
	Token int64
	// Next is, for a fair lock's release, the owner the lock was handed off to (when HandedOff or
	// Registered), or the waiter it told it is now at the head of the queue, or "".
	Next string
	// Listeners is, for a release with OnlyIfAlone or CountListeners that freed the lock, how many
	// clients were subscribed to the lock's channel (the caller's own subscription included); 0 when
	// they were not counted.
	Listeners int64
	// Latched reports that the release went through the owner's own latch (a release with a known
	// count and a sequenced request id, see [Ops.ReleaseHeld]), which keeps the sequence of the owner's
	// releases for [DefaultLatchExpiry] (see [Ops.ReleaseHeldFenced]).
	Latched bool
	// NotSynced, when not nil, says that the release handed the lock off but fewer replicas than
	// required acknowledged it (see [Ops.SetReplicaSync]): the handoff owner's hold was given back, the
	// lock is free and HandedOff is false. It matches [ErrNotSynced]. The release itself stands.
	NotSynced error
}

// Release drops one hold of owner on the lock name. While holds remain, the lock's expiry is reset to
// lease. When the last hold goes, the lock goes to next if next is not nil (no notice is published,
// since the lock is not free), and otherwise is deleted and an unlock notice published.
//
// requestID makes the call retry-safe: a retry with the same id returns the first answer, which the
// script stores in an unlock latch (redisson_unlock_latch:{name}:<requestID>, kept for
// [DefaultLatchExpiry]). It returns [ErrNotHeld] when owner holds nothing. [Ops.ReleaseHeld] does the
// same with less work in Redis when the caller knows the owner's hold count.
//
// With the replica-sync safeguard on ([Ops.SetReplicaSync]), a handoff that too few replicas
// acknowledge is given back (the lock is then free and its waiters told) and reported in
// [Released.NotSynced].
func (o *Ops) Release(ctx context.Context, name, owner, requestID string, lease time.Duration, next *Handoff) (Released, error) {
	return o.ReleaseHeld(ctx, name, owner, requestID, lease, UnknownHoldCount, next)
}

// ReleaseHeld is [Ops.Release] for a caller that knows held, the owner's hold count before this call
// (as the lock actor does for an owner id of its own), or [UnknownHoldCount], and that sequences the
// owner's releases. A request id of the form "<prefix>:r<n>" (n up to 15 decimal digits, as the
// coordinator's are) says that this is the owner's release number n on name, and n must be higher for
// every release of owner on name than for the one before. The release is then retry-safe through the
// owner's own latch, redisson_unlock_latch:{name}:<owner>, which each release of the owner overwrites
// with its answer (kept for [DefaultLatchExpiry]), rather than through a latch per request: a busy
// owner creates no key per release. A retry (the same id) gets the first run's answer, and a late
// copy of an older release, which finds a higher number stored, changes nothing and returns
// [ErrStaleRelease]. When the latch does not hold its answer (it expired, or a copy of the release ran
// as [Ops.ReleaseHeldFenced], which writes none), a run of a release that leaves holds and finds the
// owner's count already one below held changes nothing either, and answers that count. A request id
// of another form, or held [UnknownHoldCount], is released as by [Ops.Release]. Otherwise, whatever
// the owner's count in Redis, one hold is released; held must be the count with no other acquisition
// or release of owner under way, as [Ops.Acquire]'s held must be.
func (o *Ops) ReleaseHeld(ctx context.Context, name, owner, requestID string, lease time.Duration, held int64, next *Handoff) (Released, error) {
	n := NamesOf(name)
	return o.ReleaseHeldNamed(ctx, &n, owner, requestID, lease, held, next)
}

// requestSeq returns n of a request id of the form "<prefix>:r<n>", n decimal digits, without leading
// zeros (so that Lua reads it as the number it is); "" for an id of another form, or with an n of more
// than 15 digits (beyond what a Lua number holds exactly).
func requestSeq(requestID string) string {
	i := strings.LastIndex(requestID, ":r")
	if i < 0 || i+2 == len(requestID) {
		return ""
	}
	for _, c := range requestID[i+2:] {
		if c < '0' || c > '9' {
			return ""
		}
	}
	digits := strings.TrimLeft(requestID[i+2:], "0")
	switch {
	case len(digits) > 15:
		return ""
	case digits == "":
		return "0"
	}
	return digits
}

// ReleaseHeldNamed is [Ops.ReleaseHeld] on the lock of the names n.
func (o *Ops) ReleaseHeldNamed(ctx context.Context, n *Names, owner, requestID string, lease time.Duration, held int64, next *Handoff) (Released, error) {
	name := n.Name
	nextOwner, nextLease, onlyIfAlone, nextToken := "", int64(0), "0", int64(0)
	if next != nil {
		nextOwner, nextLease, nextToken = next.Owner, millis(next.Lease), next.Token
		switch {
		case next.OnlyIfAlone:
			onlyIfAlone = "1"
		case next.CountListeners:
			onlyIfAlone = "2"
		}
	}
	seq := ""
	if held != UnknownHoldCount {
		if seq = requestSeq(requestID); seq == "" {
			held = UnknownHoldCount
		}
	}
	var latch string
	if seq != "" {
		latch = n.latchKey(owner)
	} else {
		latch = n.latchKey(requestID)
	}
	boxedName, token, channel := n.boxed()
	reply, syncErr := o.runCommandScript(ctx, o.undoHandoff(name, next), releaseScript,
		evalshaCommand(releaseSHA, 4, boxedName, channel, latch, token,
			o.leaseArg(lease), owner, UnlockMessage, o.latchArg, o.publishArg,
			nextOwner, nextLease, onlyIfAlone, o.tokenArg(), held, seq, nextToken))
	var buf [3]int64
	vals, err := int64s(reply, buf[:0])
	if err != nil {
		return Released{}, fmt.Errorf("lockwarden: release %q: %w", name, typed(err))
	}
	if len(vals) != 2 && len(vals) != 3 {
		return Released{}, fmt.Errorf("lockwarden: release %q: unexpected reply %v", name, slices.Clone(vals))
	}
	listeners := int64(0)
	if len(vals) == 3 {
		listeners = vals[2]
	}
	switch vals[0] {
	case -1:
		return Released{}, ErrNotHeld
	case -2:
		return Released{}, ErrStaleRelease
	}
	latched := seq != ""
	if syncErr != nil {
		return Released{Remaining: vals[0], NotSynced: syncErr, Listeners: listeners, Latched: latched}, nil
	}
	return Released{Remaining: vals[0], HandedOff: vals[1] > 0, Token: vals[1], Listeners: listeners, Latched: latched}, nil
}

// ReleaseHeldFenced is [Ops.ReleaseHeldNamed] with no handoff, for a caller that also knows token, the
// fencing token that the owner's latest acquisition of the lock got from [Ops.Acquire] (or from the
// local handoff that [Handoff.Token] confirmed), with tokens that expire ([Ops.TokensFromClock]). It
// is retry-safe without an unlock latch: the release checks that the token counter has not moved
// since that acquisition (release_fenced.lua), so that in the common case Redis reads and writes
// nothing but the lock, its channel and the counter, and keeps no latch key per owner. When the
// counter has moved for another reason (it expires [DefaultTokenExpiry] after it was set from the
// server's clock, however busy the name; a RedLock raised it; another client took the lock between a
// release that ran and a retry of it), nothing changes and the release is sent again as
// [Ops.ReleaseHeldNamed] sends it, under the same request id: a second round trip.
//
// The caller uses it only while the owner has no latch: while a release of the owner through
// ReleaseHeldNamed ([Released.Latched], or one that failed) is less than [DefaultLatchExpiry] old, the
// owner's releases go through ReleaseHeldNamed, so that each stores a higher sequence number in the
// latch and a late copy of an older one keeps finding it. (A failed release sent again under its
// request id goes as it was first sent: a fenced one again changes nothing if it found the counter
// moved the first time, and its answer is then release.lua's.)
//
// Its answers are ReleaseHeldNamed's, with one exception: a retry of the release of the last hold (by
// go-redis after a lost reply, or the caller's own under the same request id) that finds the lock
// gone and the counter moved since the first run cannot tell whether that run freed the lock or the
// hold had been lost before it, and returns [ErrNotHeld]. The lock is free either way.
//
// A token of 0 or less, held below 1, or a counter kept forever make it [Ops.ReleaseHeldNamed].
func (o *Ops) ReleaseHeldFenced(ctx context.Context, n *Names, owner, requestID string, lease time.Duration, held, token int64) (Released, error) {
	if token <= 0 || held < 1 || !o.TokensFromClock() {
		return o.ReleaseHeldNamed(ctx, n, owner, requestID, lease, held, nil)
	}
	boxedName, tokenKey, channel := n.boxed()
	command := newCommand(releaseFencedSHA, 3, boxedName, channel, tokenKey, o.leaseArg(lease), owner,
		boxedCount(held), token+1, o.publishArg)
	remaining, err := o.run(ctx, call{script: releaseFenced, command: *command}).Int64()
	freeCommand(command)
	switch {
	case err != nil:
		return Released{}, fmt.Errorf("lockwarden: release %q: %w", n.Name, typed(err))
	case remaining == -1:
		return Released{}, ErrNotHeld
	case remaining == -3:
		return o.ReleaseHeldNamed(ctx, n, owner, requestID, lease, held, nil)
	case remaining < 0:
		return Released{}, fmt.Errorf("lockwarden: release %q: unexpected reply %d", n.Name, remaining)
	}
	return Released{Remaining: remaining}, nil
}

// Renew resets the lock's expiry to lease while owner holds it. It returns [ErrNotHeld] when the owner
// no longer holds the lock, which means the hold is lost.
//
// With the replica-sync safeguard on ([Ops.SetReplicaSync]), the renewal is followed by WAIT like an
// acquisition; a renewal that too few replicas acknowledge stands on the master, and the call returns
// an error matching [ErrRenewalNotSynced]: the holder must not count on it.
func (o *Ops) Renew(ctx context.Context, name, owner string, lease time.Duration) error {
	reply, syncErr := o.runRenewing(ctx, call{script: renewScript, keys: []string{LockKey(name)},
		args: []any{millis(lease), owner}})
	n, err := reply.Int64()
	if err != nil {
		return fmt.Errorf("lockwarden: renew %q: %w", name, typed(err))
	}
	if n == 0 {
		return ErrNotHeld
	}
	if syncErr != nil {
		return fmt.Errorf("lockwarden: renew %q: %w", name, syncErr)
	}
	return nil
}

// ForceUnlock deletes the lock name whoever holds it and publishes an unlock notice. It reports
// whether a lock was deleted.
func (o *Ops) ForceUnlock(ctx context.Context, name string) (bool, error) {
	n, err := o.do(ctx, forceUnlockScript,
		[]string{LockKey(name), ChannelName(name)}, UnlockMessage, o.publish).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: force unlock %q: %w", name, typed(err))
	}
	return n == 1, nil
}

// Status is a consistent snapshot of one lock.
type Status struct {
	// Locked reports whether any owner holds the lock.
	Locked bool
	// HoldCount is the asking owner's hold count (0 when it holds nothing).
	HoldCount int64
	// TTL is the remaining lease: -2 when the lock is free, -1 when it has no expiry.
	TTL time.Duration
}

// Status reads the state of the lock name as seen by owner (which may be empty).
func (o *Ops) Status(ctx context.Context, name, owner string) (Status, error) {
	vals, err := o.do(ctx, statusScript, []string{LockKey(name)}, owner).Int64Slice()
	if err != nil {
		return Status{}, fmt.Errorf("lockwarden: status %q: %w", name, typed(err))
	}
	if len(vals) != 3 {
		return Status{}, fmt.Errorf("lockwarden: status %q: unexpected reply %v", name, vals)
	}
	return Status{Locked: vals[0] == 1, HoldCount: vals[1], TTL: ttlFromMillis(vals[2])}, nil
}

// wrongTypeError is a WRONGTYPE error of Redis that also matches [ErrWrongType].
type wrongTypeError struct{ err error }

func (e wrongTypeError) Error() string   { return e.err.Error() }
func (e wrongTypeError) Unwrap() []error { return []error{ErrWrongType, e.err} }

// kindMismatchError is the WRONGKIND error of a script that also matches [ErrKindMismatch].
type kindMismatchError struct{ err error }

func (e kindMismatchError) Error() string   { return e.err.Error() }
func (e kindMismatchError) Unwrap() []error { return []error{ErrKindMismatch, e.err} }

// typed makes a WRONGTYPE error of a script (Redis' own, or the one the scripts answer when they find a
// key of another type before they change anything) match [ErrWrongType], and a WRONGKIND error (the
// owner's field belongs to another family of locks, kindMismatch in lib.lua) match [ErrKindMismatch];
// other errors pass unchanged.
func typed(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		switch {
		case strings.HasPrefix(rerr.Error(), "WRONGTYPE"):
			return wrongTypeError{err}
		case strings.HasPrefix(rerr.Error(), "WRONGKIND"):
			return kindMismatchError{err}
		}
	}
	return err
}

// ttlFromMillis keeps Redis' negative PTTL codes (-1, -2) as they are, so callers can tell "no expiry"
// and "absent" apart from a short lease.
func ttlFromMillis(ms int64) time.Duration {
	if ms < 0 {
		return time.Duration(ms)
	}
	return time.Duration(ms) * time.Millisecond
}

// millis converts a lease to whole milliseconds for PEXPIRE, rounding up, because PEXPIRE 0 would delete
// the lock at once.
func millis(d time.Duration) int64 {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if ms < 1 {
		ms = 1
	}
	return int64(ms)
}
