package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
)

// The fuzz targets drive the public API and the actor message API with arbitrary input on miniredis,
// so they run without redis-server. Their properties: nothing panics; every error is one of the
// documented sentinels (or a context's error joined with ErrNotObtained); a call refused for bad input
// changes nothing in Redis; and a lock that is granted lives in Redis for the lease it was granted
// for, not for an overflowed remnant of it. Seeds are in testdata/fuzz/<FuzzName>/; run one with
//
//	go test -run '^$' -fuzz '^FuzzOptions$' -fuzztime 10s ./coordinator/

// fuzzSentinels are the errors the coordinator documents.
var fuzzSentinels = []error{
	coordinator.ErrNotObtained, coordinator.ErrNotHeld, coordinator.ErrClosed, coordinator.ErrNilClient,
	coordinator.ErrEmptyName, coordinator.ErrEmptyOwner, coordinator.ErrInvalidLease, coordinator.ErrInvalidWait,
	coordinator.ErrUpgrade, coordinator.ErrInvalidOption, coordinator.ErrNotSynced, coordinator.ErrInvalidKind,
	coordinator.ErrNoOwner, coordinator.ErrInvalidMessage, coordinator.ErrInvalidGroup, coordinator.ErrKindMismatch,
}

// fuzzBadInput are the sentinels of input refused before anything is sent to Redis.
var fuzzBadInput = []error{
	coordinator.ErrEmptyName, coordinator.ErrEmptyOwner, coordinator.ErrInvalidLease, coordinator.ErrInvalidWait,
	coordinator.ErrInvalidOption, coordinator.ErrInvalidKind, coordinator.ErrNoOwner, coordinator.ErrInvalidMessage,
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// fuzzCheckErr fails the test if err is neither nil nor a documented error.
func fuzzCheckErr(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || isAny(err, fuzzSentinels) {
		return
	}
	t.Fatalf("%s: error %q (%T) matches no documented sentinel", what, err, err)
}

// fuzzRedis starts a miniredis for a fuzz target and returns it with a client.
func fuzzRedis(f *testing.F) (*miniredis.Miniredis, *redis.Client) {
	mr := miniredis.RunT(f)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	f.Cleanup(func() { _ = client.Close() })
	return mr, client
}

// fuzzCheckTTL fails the test if the lock key name, just granted for lease, expires much sooner: a
// lease that overflowed on its way to Redis.
func fuzzCheckTTL(t *testing.T, mr *miniredis.Miniredis, name string, lease time.Duration) {
	t.Helper()
	if !mr.Exists(name) {
		return // a read hold of an RWMutex whose hash expiry follows its timeout keys, or released
	}
	ttl := mr.TTL(name)
	want := min(lease, 24*time.Hour)
	if ttl <= 0 || ttl < want-time.Second {
		t.Fatalf("lock %q granted for a lease of %v has a TTL of %v in Redis", name, lease, ttl)
	}
}

// FuzzOptions: New with arbitrary values for every option either refuses them with ErrInvalidOption or
// gives a coordinator whose locks live in Redis for the watchdog timeout.
func FuzzOptions(f *testing.F) {
	f.Add(int64(30*time.Second), int64(10*time.Second), 8, int64(2*time.Second), int64(5*time.Minute), 1, int64(time.Second), "", int64(0))
	f.Add(int64(0), int64(0), 0, int64(0), int64(0), 0, int64(0), "journal", int64(10))
	f.Add(int64(-1), int64(-1), -1, int64(-1), int64(-1), -1, int64(-1), "", int64(-1))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), math.MaxInt, int64(math.MaxInt64), int64(math.MaxInt64), math.MaxInt, int64(math.MaxInt64), "j", int64(math.MaxInt64))
	f.Add(int64(1), int64(1), 1, int64(1), int64(1), 1, int64(1), "j", int64(1))
	f.Add(int64(time.Millisecond-1), int64(time.Nanosecond), 1, int64(5*time.Second+1), int64(time.Millisecond), 0, int64(time.Millisecond), "", int64(0))
	mr, client := fuzzRedis(f)
	f.Fuzz(func(t *testing.T, watchdog, idle int64, handoffs int, stopRelease, fairWindow int64, replicas int,
		syncTimeout int64, journal string, journalLen int64) {
		mr.FlushAll()
		opts := []coordinator.Option{
			coordinator.WithWatchdogTimeout(time.Duration(watchdog)),
			coordinator.WithIdleTimeout(time.Duration(idle)),
			coordinator.WithMaxHandoffs(handoffs),
			coordinator.WithStopReleaseTimeout(time.Duration(stopRelease)),
			coordinator.WithFairWaitWindow(time.Duration(fairWindow)),
			coordinator.WithReplicaSync(replicas, time.Duration(syncTimeout)),
			coordinator.WithoutTelemetry(),
		}
		if journal != "" || journalLen != 0 {
			opts = append(opts, coordinator.WithEventJournal(journal, journalLen))
		}
		c, err := coordinator.New(client, opts...)
		if err != nil {
			if !errors.Is(err, coordinator.ErrInvalidOption) {
				t.Fatalf("New: %v, want nil or ErrInvalidOption", err)
			}
			if n := len(mr.Keys()); n != 0 {
				t.Fatalf("New refused its options but left %d keys in Redis", n)
			}
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		m := c.Mutex("fuzz:options")
		err = m.Lock(ctx)
		fuzzCheckErr(t, "Lock", err)
		if err == nil {
			select {
			case <-m.Done():
				t.Fatalf("Lock returned nil with watchdog %v, but Done is already closed", time.Duration(watchdog))
			default:
			}
			fuzzCheckTTL(t, mr, m.Name(), time.Duration(watchdog))
			fuzzCheckErr(t, "Unlock", m.Unlock(ctx))
		}
		fuzzCheckErr(t, "Close", c.Close())
	})
}

// FuzzMutexCalls: a sequence of calls on one handle of any kind, with arbitrary names, leases and waits.
func FuzzMutexCalls(f *testing.F) {
	f.Add("orders:42", uint8(0), int64(0), int64(int64(10*time.Millisecond)), []byte{0, 3})
	f.Add("", uint8(1), int64(time.Second), int64(time.Second), []byte{0, 1, 2, 3, 4, 5})
	f.Add("{tag}x", uint8(2), int64(-1), int64(-1), []byte{2, 2, 3})
	f.Add("redisson_lock_token:{x}", uint8(3), int64(time.Minute), int64(0), []byte{0, 0, 3, 3, 3, 4})
	f.Add("n", uint8(0), int64(math.MaxInt64), int64(math.MaxInt64), []byte{1, 0, 5})
	f.Add("n", uint8(0), int64(math.MinInt64), int64(math.MinInt64), []byte{2, 1})
	f.Add("}{", uint8(4), int64(1), int64(1), []byte{0, 2, 3})
	mr, client := fuzzRedis(f)
	f.Fuzz(func(t *testing.T, name string, kind uint8, lease, wait int64, ops []byte) {
		if len(name) > 1<<16 || len(ops) > 16 {
			return
		}
		mr.FlushAll()
		c, err := coordinator.New(client, coordinator.WithoutTelemetry(), coordinator.WithoutReplicaSync(),
			coordinator.WithoutProcessRegistry()) // its writes are not the calls' to check
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var hopts []coordinator.MutexOption
		handleLease := coordinator.DefaultWatchdogTimeout
		if kind&8 != 0 {
			hopts = append(hopts, coordinator.WithLease(time.Duration(lease)))
			handleLease = time.Duration(lease)
		}
		if kind&16 != 0 {
			hopts = append(hopts, coordinator.WithOwner(name))
		}
		var m *coordinator.Mutex
		switch kind % 4 {
		case 0:
			m = c.Mutex(name, hopts...)
		case 1:
			m = c.FairMutex(name, hopts...)
		case 2:
			m = c.RWMutex(name, hopts...).Write()
		case 3:
			m = c.RWMutex(name, hopts...).Read()
		}
		for i, op := range ops {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			before := mr.Dump()
			var err error
			var what string
			granted := time.Duration(0) // the lease of a hold just taken
			switch op % 7 {
			case 0:
				what = "Lock"
				if err = m.Lock(ctx); err == nil {
					granted = handleLease
				}
			case 1:
				what = "TryLock"
				var ok bool
				if ok, err = m.TryLock(ctx); ok {
					granted = handleLease
				}
			case 2:
				what = "TryLock(Wait, Lease)"
				var ok bool
				if ok, err = m.TryLock(ctx, coordinator.Wait(time.Duration(wait)), coordinator.Lease(time.Duration(lease))); ok {
					granted = time.Duration(lease)
				}
			case 3:
				what = "Unlock"
				err = m.Unlock(ctx)
			case 4:
				what = "ForceUnlock"
				_, err = m.ForceUnlock(ctx)
			case 5:
				what = "status"
				_, err = m.IsLocked(ctx)
				if err == nil {
					_, err = m.HoldCount(ctx)
				}
				if err == nil {
					_, err = m.TTL(ctx)
				}
			case 6:
				what = "Token/Done"
				_ = m.Token()
				_ = m.Done()
			}
			ended := ctx.Err() // the op's 50 ms ran out (a loaded machine): then ctx.Err() is its documented answer
			cancel()
			what = fmt.Sprintf("op %d %s(name %q, lease %v, wait %v)", i, what, name, time.Duration(lease), time.Duration(wait))
			if ended == nil || !errors.Is(err, ended) {
				fuzzCheckErr(t, what, err)
			}
			if err != nil && isAny(err, fuzzBadInput) {
				if after := mr.Dump(); after != before {
					t.Fatalf("%s refused with %v but changed Redis:\nbefore:\n%s\nafter:\n%s", what, err, before, after)
				}
			}
			if err == nil && granted != 0 && kind%4 != 3 {
				fuzzCheckTTL(t, mr, name, granted)
			}
		}
		fuzzCheckErr(t, "Close", c.Close())
	})
}

// FuzzMessages: the messages of the actor message API with arbitrary fields, sent to the gateway with
// RequestFuture. Every message is answered, within its wait, with a reply of the API; an Error reply
// carries a documented sentinel.
func FuzzMessages(f *testing.F) {
	f.Add(uint8(0), "orders:42", uint8(0), int64(0), int64(0), "owner")
	f.Add(uint8(0), "orders:42", uint8(0), int64(0), int64(0), "")
	f.Add(uint8(1), "", uint8(9), int64(-1), int64(-1), "o")
	f.Add(uint8(2), "x", uint8(3), int64(math.MaxInt64), int64(math.MaxInt64), "o")
	f.Add(uint8(4), "x", uint8(2), int64(1), int64(math.MaxInt64), "o")
	f.Add(uint8(5), "x", uint8(1), int64(0), int64(0), "o")
	f.Add(uint8(9), "x", uint8(255), int64(math.MinInt64), int64(math.MinInt64), "")
	mr, client := fuzzRedis(f)
	f.Fuzz(func(t *testing.T, typ uint8, name string, kind uint8, wait, lease int64, owner string) {
		if len(name) > 1<<16 || len(owner) > 1<<16 {
			return
		}
		mr.FlushAll()
		c, err := coordinator.New(client, coordinator.WithoutTelemetry(), coordinator.WithoutReplicaSync(),
			coordinator.WithoutProcessRegistry()) // its writes are not the calls' to check
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		k := messages.Kind(kind)
		// A fresh coordinator on an empty Redis: the lock is free, so even WaitForever is answered at
		// once; a wait is bounded here so that a wrong answer shows up as a missing one.
		w := time.Duration(wait)
		if w > time.Second && w != messages.WaitForever {
			w = time.Second
		}
		var msg any
		switch typ % 10 {
		case 0:
			msg = messages.Acquire{Name: name, Kind: k, Wait: w, Lease: time.Duration(lease), Owner: owner}
		case 1:
			msg = &messages.Acquire{Name: name, Kind: k, Wait: w, Lease: time.Duration(lease), Owner: owner}
		case 2:
			msg = messages.Release{Name: name, Kind: k, Owner: owner}
		case 3:
			msg = &messages.Release{Name: name, Kind: k, Owner: owner}
		case 4:
			msg = messages.ForceUnlock{Name: name, Kind: k}
		case 5:
			msg = messages.Status{Name: name, Kind: k, Owner: owner}
		case 6:
			msg = (*messages.Acquire)(nil)
		case 7:
			msg = (*messages.Status)(nil)
		case 8:
			msg = name // not a message of the API
		case 9:
			msg = &messages.ForceUnlock{Name: name, Kind: k}
		}
		before := mr.Dump()
		res, err := c.ActorSystem().Root.RequestFuture(c.PID(), msg, 5*time.Second).Result()
		if err != nil {
			t.Fatalf("%#v: no answer: %v", msg, err)
		}
		switch r := res.(type) {
		case *messages.Acquired:
			if r.Kind != messages.KindRead {
				fuzzCheckTTL(t, mr, name, r.Lease)
			}
		case *messages.NotObtained, *messages.Released, *messages.NotHeld, *messages.ForceUnlocked, *messages.StatusReply:
		case *messages.Error:
			fuzzCheckErr(t, fmt.Sprintf("%#v", msg), r.Err)
			if r.Err == nil {
				t.Fatalf("%#v: Error reply without an error", msg)
			}
			if isAny(r.Err, fuzzBadInput) {
				if after := mr.Dump(); after != before {
					t.Fatalf("%#v refused with %v but changed Redis:\nbefore:\n%s\nafter:\n%s", msg, r.Err, before, after)
				}
			}
		default:
			t.Fatalf("%#v: reply %#v is not a reply of the API", msg, res)
		}
		fuzzCheckErr(t, "Close", c.Close())
	})
}
