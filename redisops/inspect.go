package redisops

import (
	"context"
	_ "embed"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ObjectKind is what Inspect found stored under a name.
type ObjectKind uint8

const (
	// ObjectNone is a name with nothing stored under it: a free lock (its fencing-token counter and a
	// fair lock's queue may still exist), or a latch counted down to zero.
	ObjectNone ObjectKind = iota
	// ObjectLock is a reentrant lock (Redisson's RLock, or a fair lock whose queue is empty: the two
	// keep the same hash).
	ObjectLock
	// ObjectFairLock is a fair lock (Redisson's RFairLock) with waiters queued.
	ObjectFairLock
	// ObjectReadWriteLock is a read-write lock (Redisson's RReadWriteLock): a hash with a mode field.
	ObjectReadWriteLock
	// ObjectPermitSemaphore is a semaphore of permits with ids (Redisson's
	// RPermitExpirableSemaphore): a count of available permits and a sorted set of acquired ones.
	ObjectPermitSemaphore
	// ObjectSemaphore is a counting semaphore (Redisson's RSemaphore), told from a latch by the
	// subscribers of its channel.
	ObjectSemaphore
	// ObjectLatch is a count-down latch (Redisson's RCountDownLatch), told from a semaphore by the
	// subscribers of its channel.
	ObjectLatch
	// ObjectCounter is a semaphore or a count-down latch: both keep a number in a string, and nobody
	// subscribed to either's channel tells which.
	ObjectCounter
	// ObjectOther is data that no lock, semaphore or latch keeps: another type of key, or a string that
	// is not a number.
	ObjectOther
)

// String returns the kind's name in words, such as "read-write lock".
func (k ObjectKind) String() string {
	switch k {
	case ObjectNone:
		return "none"
	case ObjectLock:
		return "lock"
	case ObjectFairLock:
		return "fair lock"
	case ObjectReadWriteLock:
		return "read-write lock"
	case ObjectPermitSemaphore:
		return "permit semaphore"
	case ObjectSemaphore:
		return "semaphore"
	case ObjectLatch:
		return "count-down latch"
	case ObjectCounter:
		return "semaphore or count-down latch"
	case ObjectOther:
		return "other"
	}
	return "ObjectKind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText writes the kind as String does, so that JSON shows it in words.
func (k ObjectKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind written by MarshalText.
func (k *ObjectKind) UnmarshalText(text []byte) error {
	for c := ObjectNone; c <= ObjectOther; c++ {
		if c.String() == string(text) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("lockwarden: unknown object kind %q", text)
}

// Holder is an owner that holds a lock, as stored in Redis.
type Holder struct {
	// Owner is the owner id: <client id>:<n> for lockwarden and Redisson (Redisson's n is a thread
	// id), or whatever id the application gave.
	Owner string `json:"owner"`
	// Count is the owner's hold count (re-entries included).
	Count int64 `json:"count"`
	// Mode is "read" or "write" for a holder of a read-write lock, "" for the other locks.
	Mode string `json:"mode,omitempty"`
	// Lease is the remaining lease of a reader's longest hold, from its timeout keys; 0 for the other
	// holders, whose lease is the lock's (Inspection.Lease).
	Lease time.Duration `json:"lease_ns,omitempty"`
	// Process is the registered process of the owner's client id ([OwnerClientID]), nil when it is not
	// a registered lockwarden coordinator (Redisson, another client, or a coordinator that stopped).
	// Filled by the coordinator's Inspect, not by [Inspect].
	Process *Process `json:"process,omitempty"`
	// HeldSince is when the hold was first granted, as the holding process records it in its
	// registration (about every second); zero when not known: a hold younger than that, or an owner
	// that is not a registered lockwarden process. Filled by the coordinator's Inspect.
	HeldSince time.Time `json:"held_since,omitzero"`
}

// Waiter is an owner queued for a fair lock, in Redis.
type Waiter struct {
	// Owner is the waiter's owner id.
	Owner string `json:"owner"`
	// Deadline is when the waiter counts as gone unless it asks again (Redisson's timeout score, an
	// instant of the clock of the clients); zero when the queue has no score for it.
	Deadline time.Time `json:"deadline"`
	// Process is as for [Holder.Process].
	Process *Process `json:"process,omitempty"`
}

// AcquiredPermit is an acquired permit of a permit semaphore.
type AcquiredPermit struct {
	// ID is the permit id, 32 lower-case hexadecimal characters.
	ID string `json:"id"`
	// Expires is when the permit's lease runs out (an instant of the clients' clock); zero for a
	// permit taken with no lease.
	Expires time.Time `json:"expires"`
}

// Inspection is what Redis stores under one name, read in one script call (a consistent snapshot),
// whoever wrote it: lockwarden, Redisson or another client of Redisson's layout.
type Inspection struct {
	// Name is the name inspected.
	Name string `json:"name"`
	// Kind is what is stored under the name.
	Kind ObjectKind `json:"kind"`
	// RedisType is the Redis type of the key Name ("none", "hash", "string", ...).
	RedisType string `json:"redis_type"`
	// Lease is the remaining time to live of the key Name: for a lock, the time until it expires unless
	// renewed. 0 when the key does not exist or NoExpiry is set.
	Lease time.Duration `json:"lease_ns"`
	// NoExpiry is set when the key Name exists and has no expiry.
	NoExpiry bool `json:"no_expiry,omitempty"`
	// Holders are the owners holding a lock, sorted by owner id (a read-write lock's writer first).
	Holders []Holder `json:"holders,omitempty"`
	// Mode is a read-write lock's mode: "read" or "write".
	Mode string `json:"mode,omitempty"`
	// WriteIntent is the owner id of the writer that a read-write lock's new readers are kept out for,
	// while it waits for the readers to leave (lockwarden's own key; "" when none).
	WriteIntent string `json:"write_intent,omitempty"`
	// Queue are the waiters of a fair lock in the order they get it.
	Queue []Waiter `json:"queue,omitempty"`
	// Token is the name's latest fencing token, read from its counter (redisson_lock_token:{N}) while
	// the counter exists; 0 when it does not. It is the last token handed out, except as below. A
	// counter kept for good (persistent tokens, Redisson's RFencedLock) holds it; lockwarden's default
	// counter, which starts from the server's clock and expires ([DefaultTokenExpiry]), holds the
	// value above it (kept for a local handoff, see [Ops.SetTokenExpiry]). A release that freed the
	// lock through release_fenced.lua ([Ops.ReleaseHeldFenced]: a Mutex's Unlock, as a rule) raised
	// that counter by one, so on a lock it left free Token is then one above the last token handed
	// out. No later acquisition gets a token at or below it.
	Token int64 `json:"token,omitempty"`
	// Count is the number stored for a semaphore (available permits, permit semaphores included) or a
	// latch (its count).
	Count int64 `json:"count,omitempty"`
	// Permits are a permit semaphore's acquired permits, soonest expiry first, at most
	// [InspectLimit].
	Permits []AcquiredPermit `json:"permits,omitempty"`
	// AcquiredPermits is how many permits of a permit semaphore are acquired in all.
	AcquiredPermits int64 `json:"acquired_permits,omitempty"`
	// Subscribers counts the subscriptions to the name's channels (a fair lock's queued waiters' own
	// channels included): one per connection and channel, so a process that waits for the name
	// counts once per channel it listens on. 0 means nobody waits for the name or listens to it. In
	// Redis Cluster it adds up the nodes' counts.
	Subscribers int64 `json:"subscribers"`
	// Truncated is set when a list above was cut at InspectLimit entries.
	Truncated bool `json:"truncated,omitempty"`
}

// InspectLimit is the most entries Inspect returns of each list: holders, queue, permits, and the
// timeout keys of one reader.
const InspectLimit = 1000

var (
	//go:embed inspect.lua
	inspectSource string
	inspectScript = redis.NewScript(inspectSource)
)

// Inspect reads what Redis stores under name, changing nothing, in one script call, and counts the
// subscribers of its channels. It needs a client that runs scripts and PUBSUB: a *redis.Client or a
// *redis.ClusterClient.
func Inspect(ctx context.Context, client redis.UniversalClient, name string) (Inspection, error) {
	keys := []string{name, FairQueueKey(name), FairTimeoutKey(name), TokenKey(name), PermitTimeoutKey(name), WriteIntentKey(name)}
	reply, err := inspectScript.Run(ctx, client, keys, suffixed(name, ""), InspectLimit).Slice()
	if err != nil && strings.HasPrefix(err.Error(), "CROSSSLOT") {
		// On Redis Cluster, a name with an empty or unclosed hash tag ("a{}b", "a{b") does not share
		// its slot with the keys kept beside it: no lock can be kept under it, and only its own key
		// is read.
		reply, err = inspectOwnKey(ctx, client, name)
	}
	if err != nil {
		return Inspection{}, fmt.Errorf("lockwarden: inspect %q: %w", name, err)
	}
	in, err := parseInspection(name, reply)
	if err != nil {
		return Inspection{}, fmt.Errorf("lockwarden: inspect %q: %w", name, err)
	}
	channels := []string{ChannelName(name), RWChannelName(name)}
	for _, w := range in.Queue { // a fair lock's waiters listen on channels of their own
		channels = append(channels, FairChannelName(name, w.Owner))
	}
	lockSubs, err := Subscribers(ctx, client, channels...)
	if err != nil {
		return Inspection{}, err
	}
	var semSubs, latchSubs int64
	switch in.Kind {
	case ObjectPermitSemaphore, ObjectCounter:
		if semSubs, err = Subscribers(ctx, client, SemaphoreChannel(name)); err != nil {
			return Inspection{}, err
		}
		if in.Kind == ObjectCounter {
			if latchSubs, err = Subscribers(ctx, client, LatchChannel(name)); err != nil {
				return Inspection{}, err
			}
		}
	}
	switch {
	case in.Kind == ObjectCounter && semSubs > 0 && latchSubs == 0:
		in.Kind = ObjectSemaphore
	case in.Kind == ObjectCounter && latchSubs > 0 && semSubs == 0:
		in.Kind = ObjectLatch
	}
	in.Subscribers = lockSubs + semSubs + latchSubs
	return in, nil
}

// inspectOwnKey reads the key name alone, in a reply of inspect.lua's shape.
func inspectOwnKey(ctx context.Context, client redis.UniversalClient, name string) ([]any, error) {
	typ, err := client.Type(ctx, name).Result()
	if err != nil {
		return nil, err
	}
	pttl, err := client.PTTL(ctx, name).Result()
	if err != nil {
		return nil, err
	}
	ms := int64(-2)
	switch {
	case pttl == -1:
		ms = -1
	case pttl > 0:
		ms = pttl.Milliseconds()
	}
	var contents []any
	mode, fields := "", int64(0)
	switch typ {
	case "hash":
		all, err := client.HGetAll(ctx, name).Result()
		if err != nil {
			return nil, err
		}
		for f, v := range all {
			if len(contents) < 2*InspectLimit {
				contents = append(contents, f, v)
			}
		}
		mode, fields = all["mode"], int64(len(all))
	case "string":
		v, err := client.Get(ctx, name).Result()
		if err != nil && err != redis.Nil {
			return nil, err
		}
		contents = []any{v}
	}
	return []any{typ, ms, contents, []any{}, []any{}, "", []any{}, int64(0), "", []any{}, mode, []any{fields, int64(0)}}, nil
}

// parseInspection reads inspect.lua's reply.
func parseInspection(name string, reply []any) (Inspection, error) {
	if len(reply) != 12 {
		return Inspection{}, fmt.Errorf("unexpected reply of %d elements", len(reply))
	}
	in := Inspection{Name: name}
	in.RedisType, _ = reply[0].(string)
	switch pttl, _ := reply[1].(int64); {
	case pttl == -1:
		in.NoExpiry = true
	case pttl > 0:
		in.Lease = time.Duration(pttl) * time.Millisecond
	}
	contents := strs(reply[2])
	mode, _ := reply[10].(string)
	counts, _ := reply[11].([]any)
	var fields, queued int64
	if len(counts) == 2 {
		fields, _ = counts[0].(int64)
		queued, _ = counts[1].(int64)
	}
	switch in.RedisType {
	case "none":
		in.Kind = ObjectNone
	case "hash":
		// A lock's hash holds counts, and a read-write lock's a mode of read or write besides: any
		// other field or mode is data of another kind.
		in.Kind = ObjectLock
		if mode != "" {
			in.Kind, in.Mode = ObjectReadWriteLock, mode
			if mode != modeRead && mode != modeWrite {
				in.Kind = ObjectOther
			}
		}
		in.Truncated = fields > InspectLimit
		for i := 0; i+1 < len(contents); i += 2 {
			field, value := contents[i], contents[i+1]
			if field == "mode" && mode != "" {
				continue
			}
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n <= 0 {
				in.Kind = ObjectOther // not a hold count: not a lock's hash
				continue
			}
			in.Holders = append(in.Holders, Holder{Owner: field, Count: n})
		}
		if in.Kind == ObjectOther {
			in.Holders, in.Mode = nil, ""
		}
	case "string":
		in.Kind = ObjectOther
		if len(contents) == 1 {
			if n, err := strconv.ParseInt(contents[0], 10, 64); err == nil {
				in.Kind, in.Count = ObjectCounter, n
			}
		}
	default:
		in.Kind = ObjectOther
	}
	if in.Kind == ObjectReadWriteLock {
		readLeases := map[string]time.Duration{}
		reads, _ := reply[9].([]any)
		for _, r := range reads {
			entry, _ := r.([]any)
			if len(entry) == 0 {
				continue
			}
			owner, _ := entry[0].(string)
			var longest int64
			for _, v := range entry[1:] {
				if ms, _ := v.(int64); ms > longest {
					longest = ms
				}
			}
			readLeases[owner] = time.Duration(longest) * time.Millisecond
		}
		for i := range in.Holders {
			h := &in.Holders[i]
			if owner, ok := strings.CutSuffix(h.Owner, ":"+modeWrite); ok {
				h.Owner, h.Mode = owner, modeWrite
			} else {
				h.Mode, h.Lease = modeRead, readLeases[h.Owner]
			}
		}
	}
	sort.SliceStable(in.Holders, func(i, j int) bool {
		a, b := in.Holders[i], in.Holders[j]
		if (a.Mode == modeWrite) != (b.Mode == modeWrite) {
			return a.Mode == modeWrite
		}
		if a.Owner != b.Owner {
			return a.Owner < b.Owner
		}
		return a.Mode > b.Mode
	})
	queue, timeouts := strs(reply[3]), strs(reply[4])
	deadlines := make(map[string]time.Time, len(timeouts)/2)
	for i := 0; i+1 < len(timeouts); i += 2 {
		if ms, err := strconv.ParseFloat(timeouts[i+1], 64); err == nil {
			deadlines[timeouts[i]] = time.UnixMilli(int64(ms))
		}
	}
	for _, owner := range queue {
		in.Queue = append(in.Queue, Waiter{Owner: owner, Deadline: deadlines[owner]})
	}
	in.Truncated = in.Truncated || queued > int64(len(queue))
	if len(in.Queue) > 0 && (in.Kind == ObjectLock || in.Kind == ObjectNone) {
		in.Kind = ObjectFairLock
	}
	if s, _ := reply[5].(string); s != "" {
		in.Token, _ = strconv.ParseInt(s, 10, 64)
	}
	permits := strs(reply[6])
	in.AcquiredPermits, _ = reply[7].(int64)
	for i := 0; i+1 < len(permits); i += 2 {
		p := AcquiredPermit{ID: hex.EncodeToString([]byte(permits[i]))}
		if ms, err := strconv.ParseFloat(permits[i+1], 64); err == nil && int64(ms) != NonExpirableTimeout {
			p.Expires = time.UnixMilli(int64(ms))
		}
		in.Permits = append(in.Permits, p)
	}
	in.Truncated = in.Truncated || in.AcquiredPermits > int64(len(in.Permits))
	if in.AcquiredPermits > 0 && (in.Kind == ObjectCounter || in.Kind == ObjectNone) {
		in.Kind = ObjectPermitSemaphore
	}
	in.WriteIntent, _ = reply[8].(string)
	return in, nil
}

// strs returns the strings of a script's array reply (the other elements skipped).
func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Subscribers counts the subscriptions to the channels (one per connection and channel), with
// SUBSCRIBE or, on Redis Cluster, SSUBSCRIBE: in Cluster, every node's count of both, masters and
// replicas, added up.
func Subscribers(ctx context.Context, client redis.UniversalClient, channels ...string) (int64, error) {
	sum := func(m map[string]int64) (n int64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	if c, ok := client.(*redis.ClusterClient); ok {
		var (
			total int64
			mu    = make(chan struct{}, 1)
		)
		err := c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			plain, err := node.PubSubNumSub(ctx, channels...).Result()
			if err != nil {
				return err
			}
			sharded, err := node.PubSubShardNumSub(ctx, channels...).Result()
			if err != nil {
				return err
			}
			mu <- struct{}{}
			total += sum(plain) + sum(sharded)
			<-mu
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("lockwarden: count subscribers: %w", err)
		}
		return total, nil
	}
	plain, err := client.PubSubNumSub(ctx, channels...).Result()
	if err != nil {
		return 0, fmt.Errorf("lockwarden: count subscribers: %w", err)
	}
	return sum(plain), nil
}
