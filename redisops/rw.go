package redisops

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The read-write lock (Redisson's RReadWriteLock) N is a HASH at key N with the field "mode" = "read" or
// "write", one field per reader owner -> read hold count, and the writer's field "<owner>:write" -> write
// hold count. Each read hold k of an owner (its k-th, 1-based) also has a STRING key
// [ReadTimeoutKey](N, owner, k) with that hold's own expiry; the hash's expiry is kept at the longest of
// them (and at least the write lease while a writer holds the lock), so one reader's long lease does not
// pin another's short one. A writer may take read holds (a downgrade); a reader may not take the write
// lock (an upgrade, refused with [ErrUpgrade]). Notices go to [RWChannelName]: [UnlockMessage] when the
// last read hold goes, [ReadUnlockMessage] when the write lock goes (it wakes every waiter).
//
// Writers are preferred, as with sync.RWMutex: a writer refused by readers may leave its intent in the
// STRING [WriteIntentKey](N) (its owner id, with an expiry), and while it is there new readers are
// refused, so that a stream of overlapping readers cannot starve the writer. The key is ours: Redisson
// does not know it.

// ErrUpgrade is returned when an owner that holds read holds asks for the write lock: Redisson would wait
// forever for itself; we refuse.
var ErrUpgrade = errors.New("lockwarden: cannot upgrade a read hold to a write hold")

const (
	// modeRead and modeWrite are the values of the hash's "mode" field.
	modeRead  = "read"
	modeWrite = "write"
	// rwTimeoutSuffix follows the owner id in the names of its read timeout keys; the scripts that walk
	// every reader's keys spell it out too.
	rwTimeoutSuffix = ":rwlock_timeout"
)

var (
	//go:embed rw_read_acquire.lua
	rwReadAcquireSource string
	//go:embed rw_write_acquire.lua
	rwWriteAcquireSource string
	//go:embed rw_read_release.lua
	rwReadReleaseSource string
	//go:embed rw_read_batch.lua
	rwReadBatchSource string
	//go:embed rw_write_release.lua
	rwWriteReleaseSource string
	//go:embed rw_read_renew.lua
	rwReadRenewSource string
	//go:embed rw_write_renew.lua
	rwWriteRenewSource string
	//go:embed rw_forceunlock.lua
	rwForceUnlockSource string
	//go:embed rw_status.lua
	rwStatusSource string
	//go:embed rw_clear_intent.lua
	rwClearIntentSource string

	rwReadAcquireScript  = redis.NewScript(withLib(rwReadAcquireSource))
	rwWriteAcquireScript = redis.NewScript(withLib(rwWriteAcquireSource))
	rwReadReleaseScript  = redis.NewScript(withLib(rwReadReleaseSource))
	rwWriteReleaseScript = redis.NewScript(withLib(rwWriteReleaseSource))
	rwReadRenewScript    = redis.NewScript(rwReadRenewSource)
	rwWriteRenewScript   = redis.NewScript(rwWriteRenewSource)
	rwForceUnlockScript  = redis.NewScript(withLib(rwForceUnlockSource))
	rwStatusScript       = redis.NewScript(rwStatusSource)
	rwClearIntentScript  = redis.NewScript(rwClearIntentSource)
	// rwReadBatchScript runs the calls of a read batch in one call; a batch that its shared path does
	// not take runs each call through the code of rw_read_acquire.lua and rw_read_release.lua, defined
	// ahead of it as functions.
	rwReadBatchScript = redis.NewScript(withLib("local function readAcquireOne(KEYS, ARGV)\n" + rwReadAcquireSource +
		"\nend\nlocal function readReleaseOne(KEYS, ARGV)\n" + rwReadReleaseSource + "\nend\n" + rwReadBatchSource))

	// rwReadAcquireSHA and rwReadReleaseSHA are the SHA1s of the scripts of every RLock and RUnlock,
	// boxed once (see evalshaCommand).
	rwReadAcquireSHA, rwReadReleaseSHA any = rwReadAcquireScript.Hash(), rwReadReleaseScript.Hash()
	rwReadBatchSHA                     any = rwReadBatchScript.Hash()
)

// RWScripts returns every script of the read-write lock, so that tests and warm-up code can load them
// all. The names do not clash with those of [Scripts].
func RWScripts() map[string]*redis.Script {
	return map[string]*redis.Script{
		"rw_read_acquire":  rwReadAcquireScript,
		"rw_write_acquire": rwWriteAcquireScript,
		"rw_read_release":  rwReadReleaseScript,
		"rw_read_batch":    rwReadBatchScript,
		"rw_write_release": rwWriteReleaseScript,
		"rw_read_renew":    rwReadRenewScript,
		"rw_write_renew":   rwWriteRenewScript,
		"rw_forceunlock":   rwForceUnlockScript,
		"rw_status":        rwStatusScript,
		"rw_clear_intent":  rwClearIntentScript,
		"rw_set_intent":    rwSetIntentScript,
	}
}

// suffixed returns {name}:suffix, or name:suffix when name already carries a hash tag, so that the key
// lands in the same Redis Cluster slot as the lock key itself.
func suffixed(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// RWChannelName returns the pub/sub channel on which unlock notices for the read-write lock name are
// published.
func RWChannelName(name string) string { return prefixed("redisson_rwlock", name) }

// WriteField returns the hash field that holds owner's write hold count.
func WriteField(owner string) string { return owner + ":" + modeWrite }

// ReadTimeoutKey returns the key that carries the expiry of owner's k-th read hold (1-based) on the
// read-write lock name.
func ReadTimeoutKey(name, owner string, k int64) string {
	return readTimeoutPrefix(name, owner) + ":" + strconv.FormatInt(k, 10)
}

// readTimeoutPrefix is what owner's read timeout keys start with; the scripts append ":<k>".
func readTimeoutPrefix(name, owner string) string { return suffixed(name, owner+rwTimeoutSuffix) }

// allReadersPrefix is what every reader's timeout keys start with, for the scripts that walk all the
// readers of the hash: reader R's k-th key is allReadersPrefix + R + ":rwlock_timeout:" + k.
func allReadersPrefix(name string) string { return suffixed(name, "") }

// ReadAcquire takes one read hold of the read-write lock name for owner, with its own lease. It is allowed
// when the lock is free or read-locked, or write-locked by owner itself (a downgrade: the writer takes
// read holds). The hash's expiry is raised to lease if it is shorter. Reads get no fencing token: the
// answer's Token is 0 and HoldCount is owner's read hold count. When another owner holds the write lock,
// the answer carries the lock's remaining TTL.
//
// A new reader (owner holds no read hold and is not the writer) is also refused, free lock or
// read-locked, while another owner's write intent stands (see [Ops.WriteAcquire]); the answer's TTL is
// then the intent's remaining expiry, at least 1 ms. A re-entry (owner already holds read holds) and a
// downgrade are always allowed: refusing them could deadlock a reader against the writer waiting for it.
//
// held is owner's read hold count before this call as far as the caller knows, or [UnknownHoldCount];
// with a known count the call is retry-safe like [Ops.Acquire]: a replay that finds the count already
// above held takes no second hold.
//
// With the replica-sync safeguard on ([Ops.SetReplicaSync]), a hold that too few replicas acknowledge
// is given back and the call returns an error matching [ErrNotSynced].
func (o *Ops) ReadAcquire(ctx context.Context, name, owner string, lease time.Duration, held int64) (Acquired, error) {
	return o.ReadAcquireNamed(ctx, rwNamesOnce(name), owner, lease, held)
}

// ReadAcquireNamed is [Ops.ReadAcquire] on the lock of n, whose keys it builds no more.
func (o *Ops) ReadAcquireNamed(ctx context.Context, n *RWNames, owner string, lease time.Duration, held int64) (Acquired, error) {
	if err := n.check(); err != nil {
		return Acquired{}, err
	}
	c := o.readAcquireCall(n, n.reader(owner), lease, held)
	if o.syncsGrants(ctx, n.lock) { // else no WAIT follows, and the undo is never needed
		c.grant = o.undoRead(n.lock, owner, lease)
	}
	v, err := o.runChecked(ctx, c).Result()
	return readAcquireReply(n.lock, v, err)
}

// readAcquireCall is the script call of [Ops.ReadAcquireNamed] of reader r, shared with
// [Batch.ReadAcquire]: an EVALSHA command given whole.
func (o *Ops) readAcquireCall(n *RWNames, r *readerNames, lease time.Duration, held int64) call {
	return call{script: rwReadAcquireScript, command: evalshaCommand(rwReadAcquireSHA, 3,
		n.lockArg, r.timeouts, n.intentArg, o.leaseArg(lease), r.owner, r.writeField, boxedCount(held))}
}

// readAcquireReply reads the answer of a [readAcquireCall], or of one call of rw_read_batch.lua: the
// reply's value and error.
func readAcquireReply(name string, v any, err error) (Acquired, error) {
	var buf [2]int64
	vals, err := int64sOf(v, err, buf[:0])
	if err != nil {
		return Acquired{}, fmt.Errorf("lockwarden: read acquire %q: %w", name, typed(err))
	}
	if len(vals) == 2 && vals[0] == 1 {
		return Acquired{OK: true, HoldCount: vals[1]}, nil
	}
	if len(vals) == 2 && vals[0] == 0 {
		return Acquired{TTL: ttlFromMillis(vals[1])}, nil
	}
	// A copy: vals is in buf, which stays on the stack only if nothing keeps it.
	return Acquired{}, fmt.Errorf("lockwarden: read acquire %q: unexpected reply %v", name, slices.Clone(vals))
}

// WriteAcquire takes or re-enters the write lock of the read-write lock name for owner with the given
// lease, and issues a fencing token (re-entry included). It is allowed when the lock is free, or when
// owner is the writer. A first hold sets the expiry to lease; a re-entry adds lease to the expiry left,
// as Redisson's write lock does, so that a re-entry with a shorter lease never cuts the outer hold (nor
// owner's downgraded read holds) short. When other owners hold the lock, the answer carries its remaining TTL. When owner holds
// read holds and is not the writer it returns [ErrUpgrade] and changes nothing.
//
// held is owner's write hold count before this call as far as the caller knows, or [UnknownHoldCount];
// with a known count the call is retry-safe like [Ops.Acquire], and a replay returns a fresh token.
//
// intent, when above 0, leaves a write intent when owner is refused because other owners hold the lock
// in read mode: [WriteIntentKey] is set to owner with an expiry of intent, or its expiry refreshed to
// intent when it already holds owner. While it stands, new readers are refused (see [Ops.ReadAcquire]),
// so the readers drain and the writer gets its turn, as with sync.RWMutex. An intent of another owner is
// left alone: the first waiting writer keeps its place. A refusal because another writer holds the lock
// sets nothing: after that writer's unlock, readers and writers race, as in Redisson and as
// sync.RWMutex lets waiting readers in after a writer. With intent 0 nothing is set. Whenever owner gets
// the write lock (a replay or a re-entry too), its own intent is deleted. A waiter that gives up
// withdraws its intent with [Ops.ClearWriteIntent]; otherwise it runs out with its expiry, so a waiter
// refreshes it while it waits. Java Redisson readers do not know the key and are not held back by it.
//
// With the replica-sync safeguard on ([Ops.SetReplicaSync]), a hold that too few replicas acknowledge
// is given back and the call returns an error matching [ErrNotSynced].
func (o *Ops) WriteAcquire(ctx context.Context, name, owner string, lease time.Duration, held int64, intent time.Duration) (Acquired, error) {
	intentMillis := int64(0)
	if intent > 0 {
		intentMillis = millis(intent)
	}
	reply, syncErr := o.runScript(ctx, o.undoWrite(name, owner, lease), rwWriteAcquireScript,
		[]string{LockKey(name), TokenKey(name), WriteIntentKey(name)},
		millis(lease), owner, WriteField(owner), held, intentMillis, o.tokenMillis())
	vals, err := reply.Int64Slice()
	if err == nil {
		err = syncErr
	}
	if err != nil {
		return Acquired{}, fmt.Errorf("lockwarden: write acquire %q: %w", name, typed(err))
	}
	switch {
	case len(vals) == 3 && vals[0] == 1:
		return Acquired{OK: true, HoldCount: vals[1], Token: vals[2]}, nil
	case len(vals) == 2 && vals[0] == 0:
		return Acquired{TTL: ttlFromMillis(vals[1])}, nil
	case len(vals) == 1 && vals[0] == -1:
		return Acquired{}, ErrUpgrade
	}
	return Acquired{}, fmt.Errorf("lockwarden: write acquire %q: unexpected reply %v", name, vals)
}

// ClearWriteIntent withdraws owner's write intent on the read-write lock name (see [Ops.WriteAcquire]):
// a waiting writer that gave up calls it so that new readers are let in at once. The intent is deleted
// only if it holds owner; another writer's intent is left alone. It reports whether it deleted one.
func (o *Ops) ClearWriteIntent(ctx context.Context, name, owner string) (bool, error) {
	n, err := o.do(ctx, rwClearIntentScript, []string{WriteIntentKey(name)}, owner).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: clear write intent %q: %w", name, typed(err))
	}
	return n == 1, nil
}

// ReadRelease drops owner's latest read hold on the read-write lock name and deletes that hold's timeout
// key. While the writer (owner itself, after a downgrade) still holds the lock, the expiry stands.
// Otherwise the expiry becomes the longest remaining read hold's; when no read hold is left, or every one
// left has run out, the lock is deleted and [UnlockMessage] published on [RWChannelName]. When the
// expiry becomes more than 50 ms sooner, [UnlockMessage] is published too, so that a waiting writer
// learns it. Remaining is owner's read hold count left, and 0 when the lock was deleted.
//
// The common case costs O(1): the lock's expiry is kept at its longest read hold's, so when the released
// hold expired more than 2 ms before the lock and other holders remain, the longest remaining hold is
// unchanged; the expiry stands and nothing is published. Only the release of the longest hold (or of
// one that already ran out) walks every reader's timeout keys to find the new expiry.
//
// lease is not used: a read hold's expiry is its own timeout key's, and Redisson's read unlock takes no
// lease either; the parameter keeps the call shaped like [Ops.WriteRelease].
//
// requestID makes the call retry-safe like [Ops.Release]. It returns [ErrNotHeld] when owner holds no
// read hold.
func (o *Ops) ReadRelease(ctx context.Context, name, owner, requestID string, lease time.Duration) (Released, error) {
	return o.ReadReleaseHeld(ctx, name, owner, requestID, lease, UnknownHoldCount)
}

// ReadReleaseHeld is [Ops.ReadRelease] for a caller that sequences owner's releases, as
// [Ops.ReleaseHeld] describes: with held other than [UnknownHoldCount] and a request id of the form
// "<prefix>:r<n>", the answer goes to the owner's own latch redisson_unlock_latch:{name}:<owner>,
// overwritten by each release rather than created per request, and a late copy of an older release
// changes nothing and returns [ErrStaleRelease]. held is not otherwise used: a read release drops the
// owner's latest hold whatever its count.
func (o *Ops) ReadReleaseHeld(ctx context.Context, name, owner, requestID string, lease time.Duration, held int64) (Released, error) {
	return o.ReadReleaseNamed(ctx, rwNamesOnce(name), owner, requestID, held)
}

// ReadReleaseNamed is [Ops.ReadReleaseHeld] on the lock of n, whose keys it builds no more.
func (o *Ops) ReadReleaseNamed(ctx context.Context, n *RWNames, owner, requestID string, held int64) (Released, error) {
	if err := n.check(); err != nil {
		return Released{}, err
	}
	v, err := o.run(ctx, o.readReleaseCall(n, n.reader(owner), requestID, held)).Result()
	return readReleaseReply(n.lock, v, err)
}

// readReleaseCall is the script call of [Ops.ReadReleaseNamed] of reader r, shared with
// [Batch.ReadRelease]: an EVALSHA command given whole.
func (o *Ops) readReleaseCall(n *RWNames, r *readerNames, requestID string, held int64) call {
	seq, sequenced := readReleaseSeq(requestID, held)
	return o.readReleaseCallSeq(n, r, requestID, seq, sequenced)
}

// releaseLatch is the latch key of a read release of reader r: the reader's own when the release is
// sequenced, one for its request id when not.
func releaseLatch(n *RWNames, r *readerNames, requestID string, sequenced bool) any {
	if sequenced {
		return r.latch
	}
	return n.latch + requestID
}

// readReleaseCallSeq is readReleaseCall with the release's sequence number already read from its
// request id (readReleaseSeq).
func (o *Ops) readReleaseCallSeq(n *RWNames, r *readerNames, requestID string, seq any, sequenced bool) call {
	return call{script: rwReadReleaseScript, command: evalshaCommand(rwReadReleaseSHA, 4,
		n.lockArg, n.channelArg, releaseLatch(n, r, requestID, sequenced), r.timeouts,
		r.owner, UnlockMessage, o.latchArg, o.publishArg, n.allReadersArg, seq)}
}

// readReleaseSeq returns the sequence number of a read release as its scripts take it, and whether the
// release is sequenced: with a known count and a request id "<prefix>:r<n>", the caller sequences the
// owner's releases, and the release's latch is the owner's own; otherwise its number is "" and its latch
// the request's.
func readReleaseSeq(requestID string, held int64) (seq any, sequenced bool) {
	if held != UnknownHoldCount {
		if s := requestSeq(requestID); s != "" {
			return s, true
		}
	}
	return "", false
}

// readReleaseReply reads the answer of a [Ops.readReleaseCall], or of one call of rw_read_batch.lua:
// the reply's value and error.
func readReleaseReply(name string, v any, err error) (Released, error) {
	n, err := int64Of(v, err)
	if err != nil {
		return Released{}, fmt.Errorf("lockwarden: read release %q: %w", name, typed(err))
	}
	switch {
	case n == -2:
		return Released{}, ErrStaleRelease
	case n < 0:
		return Released{}, ErrNotHeld
	}
	return Released{Remaining: n}, nil
}

// WriteRelease drops one write hold of owner on the read-write lock name. While write holds remain, the
// expiry is raised to lease if it is shorter, never cut: the holds left keep their time. At the last write hold,
// if owner still holds read holds (a downgrade) the lock switches to read mode with the expiry of its
// longest read hold; otherwise the lock is deleted. Either way [ReadUnlockMessage] is published on
// [RWChannelName], which wakes every waiter: after a downgrade, waiting readers may share the lock
// (Redisson publishes nothing there, so its readers wait for their retry timer). Remaining is owner's write hold count left.
//
// requestID makes the call retry-safe like [Ops.Release]. It returns [ErrNotHeld] when owner is not the
// writer.
func (o *Ops) WriteRelease(ctx context.Context, name, owner, requestID string, lease time.Duration) (Released, error) {
	n, err := o.do(ctx, rwWriteReleaseScript,
		[]string{LockKey(name), RWChannelName(name), UnlockLatchKey(name, requestID), readTimeoutPrefix(name, owner)},
		millis(lease), owner, WriteField(owner), ReadUnlockMessage, millis(o.latchExpiry), o.publish).Int64()
	if err != nil {
		return Released{}, fmt.Errorf("lockwarden: write release %q: %w", name, typed(err))
	}
	if n < 0 {
		return Released{}, ErrNotHeld
	}
	return Released{Remaining: n}, nil
}

// ReadRenew resets the timeout keys of all of owner's read holds on the read-write lock name to lease,
// and raises the lock's expiry to lease if it is shorter. It returns [ErrNotHeld], changing nothing, when
// owner holds no read hold or one of its read holds already ran out: the holds are lost. With the
// replica-sync safeguard on, a renewal that too few replicas acknowledge returns an error matching
// [ErrRenewalNotSynced], as [Ops.Renew] does.
func (o *Ops) ReadRenew(ctx context.Context, name, owner string, lease time.Duration) error {
	reply, syncErr := o.runRenewing(ctx, call{script: rwReadRenewScript,
		keys: []string{LockKey(name), readTimeoutPrefix(name, owner)}, args: []any{millis(lease), owner}})
	n, err := reply.Int64()
	if err != nil {
		return fmt.Errorf("lockwarden: read renew %q: %w", name, typed(err))
	}
	if n == 0 {
		return ErrNotHeld
	}
	if syncErr != nil {
		return fmt.Errorf("lockwarden: read renew %q: %w", name, syncErr)
	}
	return nil
}

// WriteRenew sets the expiry of the read-write lock name to lease while owner is the writer, so that the
// time write re-entries added does not pile up; when owner also holds read holds (a downgrade), it only
// raises the expiry to lease. It returns [ErrNotHeld] when owner no longer holds the write lock, which
// means the hold is lost. With the replica-sync safeguard on, a renewal that too few replicas
// acknowledge returns an error matching [ErrRenewalNotSynced], as [Ops.Renew] does.
func (o *Ops) WriteRenew(ctx context.Context, name, owner string, lease time.Duration) error {
	reply, syncErr := o.runRenewing(ctx, call{script: rwWriteRenewScript,
		keys: []string{LockKey(name)}, args: []any{millis(lease), WriteField(owner), owner}})
	n, err := reply.Int64()
	if err != nil {
		return fmt.Errorf("lockwarden: write renew %q: %w", name, typed(err))
	}
	if n == 0 {
		return ErrNotHeld
	}
	if syncErr != nil {
		return fmt.Errorf("lockwarden: write renew %q: %w", name, syncErr)
	}
	return nil
}

// ForceUnlockRead deletes the read-write lock name, with its readers' timeout keys, whoever holds it,
// but only while it is read-locked, and publishes [UnlockMessage]. It reports whether it deleted the
// lock; a write-locked lock is left alone. A waiting writer's intent ([WriteIntentKey]) is left alone too:
// it belongs to the writer, which still waits.
func (o *Ops) ForceUnlockRead(ctx context.Context, name string) (bool, error) {
	return o.rwForceUnlock(ctx, name, modeRead, UnlockMessage)
}

// ForceUnlockWrite deletes the read-write lock name, with the writer's downgraded read holds, whoever
// holds it, but only while it is write-locked, and publishes [ReadUnlockMessage]. It reports whether it
// deleted the lock; a read-locked lock is left alone. A waiting writer's intent ([WriteIntentKey]) is
// left alone too.
func (o *Ops) ForceUnlockWrite(ctx context.Context, name string) (bool, error) {
	return o.rwForceUnlock(ctx, name, modeWrite, ReadUnlockMessage)
}

func (o *Ops) rwForceUnlock(ctx context.Context, name, mode, message string) (bool, error) {
	n, err := o.do(ctx, rwForceUnlockScript,
		[]string{LockKey(name), RWChannelName(name)}, mode, message, o.publish, allReadersPrefix(name)).Int64()
	if err != nil {
		return false, fmt.Errorf("lockwarden: force unlock %s %q: %w", mode, name, typed(err))
	}
	return n == 1, nil
}

// RWStatus is a consistent snapshot of one read-write lock.
type RWStatus struct {
	// Mode is "" when the lock is free, else "read" or "write".
	Mode string
	// ReadHolds is the asking owner's read hold count (0 when it holds none).
	ReadHolds int64
	// WriteHolds is the asking owner's write hold count (0 when it is not the writer).
	WriteHolds int64
	// TTL is the remaining expiry: -2 when the lock is free, -1 when it has no expiry.
	TTL time.Duration
	// WriteIntent is the owner id held by the write intent ([WriteIntentKey]), or "" when no writer
	// waits with an intent.
	WriteIntent string
}

// RWStatus reads the state of the read-write lock name as seen by owner (which may be empty).
func (o *Ops) RWStatus(ctx context.Context, name, owner string) (RWStatus, error) {
	vals, err := o.do(ctx, rwStatusScript,
		[]string{LockKey(name), WriteIntentKey(name)}, owner, WriteField(owner)).Slice()
	if err != nil {
		return RWStatus{}, fmt.Errorf("lockwarden: rw status %q: %w", name, typed(err))
	}
	if len(vals) == 5 {
		mode, ok0 := vals[0].(string)
		reads, ok1 := vals[1].(int64)
		writes, ok2 := vals[2].(int64)
		pttl, ok3 := vals[3].(int64)
		intent, ok4 := vals[4].(string)
		if ok0 && ok1 && ok2 && ok3 && ok4 {
			return RWStatus{Mode: mode, ReadHolds: reads, WriteHolds: writes, TTL: ttlFromMillis(pttl), WriteIntent: intent}, nil
		}
	}
	return RWStatus{}, fmt.Errorf("lockwarden: rw status %q: unexpected reply %v", name, vals)
}
