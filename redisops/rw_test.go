package redisops_test

import (
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

const (
	shortLease = 3 * time.Second
	midLease   = 10 * time.Second
)

func mustRead(t *testing.T, ops *redisops.Ops, name, owner string, l time.Duration) redisops.Acquired {
	t.Helper()
	got, err := ops.ReadAcquire(t.Context(), name, owner, l, redisops.UnknownHoldCount)
	if err != nil {
		t.Fatalf("ReadAcquire(%q, %q): %v", name, owner, err)
	}
	if !got.OK || got.Token != 0 {
		t.Fatalf("ReadAcquire(%q, %q): got %+v, want OK without a token", name, owner, got)
	}
	return got
}

func mustWrite(t *testing.T, ops *redisops.Ops, name, owner string, l time.Duration) redisops.Acquired {
	t.Helper()
	got, err := ops.WriteAcquire(t.Context(), name, owner, l, redisops.UnknownHoldCount, 0)
	if err != nil {
		t.Fatalf("WriteAcquire(%q, %q): %v", name, owner, err)
	}
	if !got.OK {
		t.Fatalf("WriteAcquire(%q, %q): got %+v, want OK", name, owner, got)
	}
	return got
}

func mustReadRelease(t *testing.T, ops *redisops.Ops, name, owner, requestID string, want int64) {
	t.Helper()
	got, err := ops.ReadRelease(t.Context(), name, owner, requestID, lease)
	if err != nil {
		t.Fatalf("ReadRelease(%q, %q): %v", name, owner, err)
	}
	if got != (redisops.Released{Remaining: want}) {
		t.Fatalf("ReadRelease(%q, %q): got %+v, want Remaining %d", name, owner, got, want)
	}
}

func mustWriteRelease(t *testing.T, ops *redisops.Ops, name, owner, requestID string, want int64) {
	t.Helper()
	got, err := ops.WriteRelease(t.Context(), name, owner, requestID, lease)
	if err != nil {
		t.Fatalf("WriteRelease(%q, %q): %v", name, owner, err)
	}
	if got != (redisops.Released{Remaining: want}) {
		t.Fatalf("WriteRelease(%q, %q): got %+v, want Remaining %d", name, owner, got, want)
	}
}

// checkRefused fails unless got is a refusal whose TTL lies in (want-ttlSlack, want].
func checkRefused(t *testing.T, what string, got redisops.Acquired, want time.Duration) {
	t.Helper()
	if got.OK || got.HoldCount != 0 || got.Token != 0 {
		t.Fatalf("%s: got %+v, want a refusal", what, got)
	}
	if got.TTL <= want-ttlSlack || got.TTL > want {
		t.Errorf("%s: got TTL %v, want about %v", what, got.TTL, want)
	}
}

// checkToken fails unless the fencing token counter of name holds want (0 = absent).
func checkToken(t *testing.T, c *redis.Client, name string, want int64) {
	t.Helper()
	got, err := c.Get(t.Context(), redisops.TokenKey(name)).Int64()
	if errors.Is(err, redis.Nil) {
		got, err = 0, nil
	}
	if err != nil || got != want {
		t.Errorf("token counter: got %d (err %v), want %d", got, err, want)
	}
}

// commandCalls returns how many times the server ran cmd (a lowercase command name) since the last
// CONFIG RESETSTAT, commands run by scripts included.
func commandCalls(t *testing.T, c *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats line %q: %v", line, err)
		}
		return n
	}
	return 0
}

// resetStats zeroes the server's command statistics, for [commandCalls].
func resetStats(t *testing.T, c *redis.Client) {
	t.Helper()
	if err := c.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatalf("CONFIG RESETSTAT: %v", err)
	}
}

// pttl returns the PTTL of key.
func pttl(t *testing.T, c *redis.Client, key string) time.Duration {
	t.Helper()
	d, err := c.PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %q: %v", key, err)
	}
	return d
}

func TestRWKeyNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fn   string
		got  string
		want string
	}{
		{"RWChannelName", redisops.RWChannelName("orders"), "redisson_rwlock:{orders}"},
		{"RWChannelName braces", redisops.RWChannelName("a{b}c"), "redisson_rwlock:a{b}c"},
		{"WriteField", redisops.WriteField("uuid:7"), "uuid:7:write"},
		{"ReadTimeoutKey", redisops.ReadTimeoutKey("orders", "uuid:7", 1), "{orders}:uuid:7:rwlock_timeout:1"},
		{"ReadTimeoutKey braces", redisops.ReadTimeoutKey("a{b}c", "uuid:7", 12), "a{b}c:uuid:7:rwlock_timeout:12"},
		{"WriteIntentKey", redisops.WriteIntentKey("orders"), "lockwarden_write_intent:{orders}"},
		{"WriteIntentKey braces", redisops.WriteIntentKey("a{b}c"), "lockwarden_write_intent:a{b}c"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.fn, tt.got, tt.want)
		}
	}
}

// TestRWKeysShareSlot checks with CLUSTER KEYSLOT of a real cluster-enabled server that the keys of one
// read-write lock land in one Redis Cluster slot, including the timeout keys of other readers that the
// scripts build themselves.
func TestRWKeysShareSlot(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes"))
	c := srv.Client(t)
	for _, name := range []string{"orders", "a{b}c", "{user:1}:lock", "x:y:z"} {
		keys := []string{
			redisops.LockKey(name),
			redisops.RWChannelName(name),
			redisops.TokenKey(name),
			redisops.UnlockLatchKey(name, "req-1"),
			redisops.ReadTimeoutKey(name, "uuid:7", 1),
			redisops.ReadTimeoutKey(name, "other", 42),
			redisops.WriteIntentKey(name),
		}
		want, err := c.ClusterKeySlot(t.Context(), keys[0]).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", keys[0], err)
		}
		for _, k := range keys[1:] {
			got, err := c.ClusterKeySlot(t.Context(), k).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
			}
			if got != want {
				t.Errorf("slot of %q: got %d, want %d (slot of lock key %q)", k, got, want, keys[0])
			}
		}
	}
}

func TestRWScriptsLoad(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	scripts := redisops.RWScripts()
	for _, name := range []string{
		"rw_read_acquire", "rw_write_acquire", "rw_read_release", "rw_write_release",
		"rw_read_renew", "rw_write_renew", "rw_forceunlock", "rw_status", "rw_clear_intent",
	} {
		if scripts[name] == nil {
			t.Errorf("RWScripts()[%q]: missing", name)
		}
	}
	for name, s := range scripts {
		if redisops.Scripts()[name] != s {
			t.Errorf("Scripts()[%q]: not the read-write script", name)
		}
	}
	for name, s := range scripts {
		t.Run(name, func(t *testing.T) {
			sha, err := s.Load(t.Context(), c).Result()
			if err != nil {
				t.Fatalf("SCRIPT LOAD: %v", err)
			}
			if sha != s.Hash() {
				t.Errorf("SCRIPT LOAD sha: got %s, want %s", sha, s.Hash())
			}
		})
	}
}

// TestRWWithoutLoadedScripts checks that every call works on a server whose script cache is empty
// (EVALSHA falls back to EVAL).
func TestRWWithoutLoadedScripts(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	if err := c.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	name := t.Name()
	mustWrite(t, ops, name, "A", lease)
	mustRead(t, ops, name, "A", lease)
	if err := ops.WriteRenew(t.Context(), name, "A", lease); err != nil {
		t.Fatalf("WriteRenew: %v", err)
	}
	if err := ops.ReadRenew(t.Context(), name, "A", lease); err != nil {
		t.Fatalf("ReadRenew: %v", err)
	}
	if _, err := ops.RWStatus(t.Context(), name, "A"); err != nil {
		t.Fatalf("RWStatus: %v", err)
	}
	if _, err := ops.ClearWriteIntent(t.Context(), name, "A"); err != nil {
		t.Fatalf("ClearWriteIntent: %v", err)
	}
	mustReadRelease(t, ops, name, "A", "r1", 0)
	mustWriteRelease(t, ops, name, "A", "r2", 0)
	if _, err := ops.ForceUnlockRead(t.Context(), name); err != nil {
		t.Fatalf("ForceUnlockRead: %v", err)
	}
	if _, err := ops.ForceUnlockWrite(t.Context(), name); err != nil {
		t.Fatalf("ForceUnlockWrite: %v", err)
	}
}

func TestReadAcquireManyReaders(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	for _, name := range []string{t.Name(), "{" + t.Name() + "}:braced"} {
		t.Run(name, func(t *testing.T) {
			if got := mustRead(t, ops, name, "A", lease); got.HoldCount != 1 {
				t.Errorf("A's first read: got %+v, want HoldCount 1", got)
			}
			if got := mustRead(t, ops, name, "B", longLease); got.HoldCount != 1 {
				t.Errorf("B's read: got %+v, want HoldCount 1", got)
			}
			if got := mustRead(t, ops, name, "A", shortLease); got.HoldCount != 2 {
				t.Errorf("A's second read: got %+v, want HoldCount 2", got)
			}
			mustRead(t, ops, name, "C", lease)

			checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "2", "B": "1", "C": "1"})
			checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 1), lease)
			checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 2), shortLease)
			checkPTTL(t, c, redisops.ReadTimeoutKey(name, "B", 1), longLease)
			checkPTTL(t, c, redisops.ReadTimeoutKey(name, "C", 1), lease)
			checkGone(t, c, redisops.ReadTimeoutKey(name, "A", 3))
			// The hash outlives the longest read hold, and a shorter one does not shorten it.
			checkPTTL(t, c, redisops.LockKey(name), longLease)
			// Reads issue no fencing tokens.
			checkToken(t, c, name, 0)
		})
	}
}

func TestWriteRefusedWhileRead(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	mustRead(t, ops, name, "A", lease)
	mustRead(t, ops, name, "B", longLease)

	got, err := ops.WriteAcquire(t.Context(), name, "W", lease, redisops.UnknownHoldCount, 0)
	if err != nil {
		t.Fatalf("WriteAcquire: %v", err)
	}
	checkRefused(t, "WriteAcquire while read-locked", got, longLease)
	checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "1", "B": "1"})
	checkPTTL(t, c, redisops.LockKey(name), longLease)
	checkToken(t, c, name, 0)
}

func TestReadRefusedWhileWrite(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	if got := mustWrite(t, ops, name, "W", lease); got != (redisops.Acquired{OK: true, HoldCount: 1, Token: 1}) {
		t.Errorf("WriteAcquire: got %+v, want count 1, token 1", got)
	}

	got, err := ops.ReadAcquire(t.Context(), name, "R", longLease, redisops.UnknownHoldCount)
	if err != nil {
		t.Fatalf("ReadAcquire by another owner: %v", err)
	}
	checkRefused(t, "ReadAcquire while write-locked", got, lease)
	got, err = ops.WriteAcquire(t.Context(), name, "X", longLease, redisops.UnknownHoldCount, 0)
	if err != nil {
		t.Fatalf("WriteAcquire by another owner: %v", err)
	}
	checkRefused(t, "WriteAcquire while write-locked", got, lease)
	checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "1"})
	checkGone(t, c, redisops.ReadTimeoutKey(name, "R", 1))
	checkToken(t, c, name, 1)

	// The writer itself may take read holds (a downgrade), which raise the expiry but issue no token.
	if got := mustRead(t, ops, name, "W", longLease); got.HoldCount != 1 {
		t.Errorf("downgrade ReadAcquire: got %+v, want HoldCount 1", got)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "1", "W": "1"})
	checkPTTL(t, c, redisops.ReadTimeoutKey(name, "W", 1), longLease)
	checkPTTL(t, c, redisops.LockKey(name), longLease)
	checkToken(t, c, name, 1)

	// Others stay out.
	got, err = ops.ReadAcquire(t.Context(), name, "R", lease, redisops.UnknownHoldCount)
	if err != nil {
		t.Fatalf("ReadAcquire by another owner: %v", err)
	}
	checkRefused(t, "ReadAcquire while write-locked and downgraded", got, longLease)
}

func TestWriteAcquireUpgradeRefused(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	for _, others := range []bool{false, true} {
		name := t.Name() + "/alone"
		if others {
			name = t.Name() + "/others"
		}
		want := map[string]string{"mode": "read", "A": "2"}
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "A", lease)
		if others {
			mustRead(t, ops, name, "B", longLease)
			want["B"] = "1"
		}
		for _, held := range []int64{redisops.UnknownHoldCount, 0} {
			got, err := ops.WriteAcquire(t.Context(), name, "A", lease, held, 0)
			if !errors.Is(err, redisops.ErrUpgrade) {
				t.Fatalf("%s: WriteAcquire by reader (held %d): got %+v, %v, want %v", name, held, got, err, redisops.ErrUpgrade)
			}
			if got != (redisops.Acquired{}) {
				t.Errorf("%s: WriteAcquire by reader: got %+v, want the zero value", name, got)
			}
		}
		checkHash(t, c, redisops.LockKey(name), want)
		checkToken(t, c, name, 0)
		if others {
			checkPTTL(t, c, redisops.LockKey(name), longLease)
		} else {
			checkPTTL(t, c, redisops.LockKey(name), lease)
		}
	}
}

func TestWriteReentryAndTokens(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()

	got := mustWrite(t, ops, name, "W", lease)
	if want := (redisops.Acquired{OK: true, HoldCount: 1, Token: 1}); got != want {
		t.Errorf("first WriteAcquire: got %+v, want %+v", got, want)
	}
	checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "1"})
	checkPTTL(t, c, redisops.LockKey(name), lease)

	// Re-entry bumps the count, issues a new token and adds its lease to the time left (Redisson's
	// pttl + lease), so a shorter inner lease never cuts the outer hold.
	got = mustWrite(t, ops, name, "W", longLease)
	if want := (redisops.Acquired{OK: true, HoldCount: 2, Token: 2}); got != want {
		t.Errorf("re-entrant WriteAcquire: got %+v, want %+v", got, want)
	}
	checkPTTL(t, c, redisops.LockKey(name), lease+longLease)
	got = mustWrite(t, ops, name, "W", shortLease)
	if want := (redisops.Acquired{OK: true, HoldCount: 3, Token: 3}); got != want {
		t.Errorf("re-entrant WriteAcquire: got %+v, want %+v", got, want)
	}
	checkPTTL(t, c, redisops.LockKey(name), lease+longLease+shortLease)

	// Reads by the writer answer token 0 and leave the counter alone.
	if got := mustRead(t, ops, name, "W", longLease); got != (redisops.Acquired{OK: true, HoldCount: 1}) {
		t.Errorf("downgrade ReadAcquire: got %+v, want count 1, token 0", got)
	}
	checkToken(t, c, name, 3)

	// With downgraded read holds, a shorter write lease does not cut the expiry below them either.
	got = mustWrite(t, ops, name, "W", shortLease)
	if want := (redisops.Acquired{OK: true, HoldCount: 4, Token: 4}); got != want {
		t.Errorf("re-entrant WriteAcquire with read holds: got %+v, want %+v", got, want)
	}
	checkPTTL(t, c, redisops.LockKey(name), lease+longLease+2*shortLease)
	checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "4", "W": "1"})
	checkToken(t, c, name, 4)
}

// TestRWAcquireRetryIsIdempotent replays acquisitions whose reply was lost: with the hold count the
// caller knew, the replay must not take a second hold nor set a second timeout key. A write replay
// answers a fresh token (see TestAcquireRetryIsIdempotent).
func TestRWAcquireRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("read", func(t *testing.T) {
		name := t.Name()
		for i := range 2 {
			got, err := ops.ReadAcquire(t.Context(), name, "A", lease, 0)
			if err != nil || got != (redisops.Acquired{OK: true, HoldCount: 1}) {
				t.Fatalf("ReadAcquire attempt %d = %+v, %v; want count 1", i+1, got, err)
			}
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "1"})
		checkGone(t, c, redisops.ReadTimeoutKey(name, "A", 2))
		// The hold found has little time left (a dead hold of the owner's that it failed to clear):
		// a replay gives it the lease back, which its caller counts on.
		for _, k := range []string{redisops.LockKey(name), redisops.ReadTimeoutKey(name, "A", 1)} {
			if err := c.PExpire(t.Context(), k, 50*time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := ops.ReadAcquire(t.Context(), name, "A", lease, 0); err != nil || got != (redisops.Acquired{OK: true, HoldCount: 1}) {
			t.Fatalf("ReadAcquire replay = %+v, %v; want count 1", got, err)
		}
		checkPTTL(t, c, redisops.LockKey(name), lease)
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 1), lease)
		got, err := ops.ReadAcquire(t.Context(), name, "A", lease, 1)
		if err != nil || got.HoldCount != 2 {
			t.Fatalf("read re-entry = %+v, %v; want count 2", got, err)
		}
		got, err = ops.ReadAcquire(t.Context(), name, "A", lease, redisops.UnknownHoldCount)
		if err != nil || got.HoldCount != 3 {
			t.Fatalf("ReadAcquire with unknown count = %+v, %v; want count 3", got, err)
		}
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 3), lease)
	})

	t.Run("write", func(t *testing.T) {
		name := t.Name()
		first, err := ops.WriteAcquire(t.Context(), name, "W", lease, 0, 0)
		if err != nil || first != (redisops.Acquired{OK: true, HoldCount: 1, Token: 1}) {
			t.Fatalf("first WriteAcquire = %+v, %v", first, err)
		}
		// The hold found has little time left (a dead hold of the owner's that it failed to clear):
		// the replay gives it the lease back, which its caller counts on.
		if err := c.PExpire(t.Context(), redisops.LockKey(name), 50*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		replay, err := ops.WriteAcquire(t.Context(), name, "W", lease, 0, 0)
		if want := (redisops.Acquired{OK: true, HoldCount: 1, Token: 2}); err != nil || replay != want {
			t.Fatalf("replayed WriteAcquire = %+v, %v; want the same hold with a fresh token, %+v", replay, err, want)
		}
		checkPTTL(t, c, redisops.LockKey(name), lease)
		checkToken(t, c, name, 2)
		reentry, err := ops.WriteAcquire(t.Context(), name, "W", lease, 1, 0)
		if err != nil || reentry != (redisops.Acquired{OK: true, HoldCount: 2, Token: 3}) {
			t.Fatalf("write re-entry = %+v, %v; want count 2, token 3", reentry, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "2"})
	})
}

func TestReadRelease(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("longest hold leaves", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustRead(t, ops, name, "A", shortLease)
		mustRead(t, ops, name, "B", midLease)
		checkPTTL(t, c, redisops.LockKey(name), midLease)

		resetStats(t, c)
		mustReadRelease(t, ops, name, "B", "r1", 0)
		// The hash now follows the remaining, shorter, read hold, found by a walk, and a waiting writer
		// is told, since the lock expires much sooner.
		if n := commandCalls(t, c, "hgetall"); n != 1 {
			t.Errorf("HGETALL calls: got %d, want 1 (the walk)", n)
		}
		checkGone(t, c, redisops.ReadTimeoutKey(name, "B", 1))
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "1"})
		checkPTTL(t, c, redisops.LockKey(name), shortLease)
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 1), shortLease)
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, ps, channel)
	})

	t.Run("shorter hold leaves", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustRead(t, ops, name, "A", shortLease)
		mustRead(t, ops, name, "A", midLease)
		mustRead(t, ops, name, "B", shortLease)
		// Raise the hash's expiry above every hold (as Redisson's write unlock leaves it after a
		// downgrade), so that a walk would show: it would lower the expiry to the longest hold left,
		// and publish.
		if err := c.PExpire(t.Context(), redisops.LockKey(name), longLease).Err(); err != nil {
			t.Fatalf("PEXPIRE: %v", err)
		}
		before := pttl(t, c, redisops.LockKey(name))

		for i, hold := range []struct {
			owner string
			left  int64
		}{{"B", 0}, {"A", 1}} {
			// Both holds are shorter than the lock, and a holder is left after each release: no walk,
			// the expiry stands, nothing is published.
			resetStats(t, c)
			mustReadRelease(t, ops, name, hold.owner, "r"+strconv.Itoa(i), hold.left)
			if n := commandCalls(t, c, "hgetall"); n != 0 {
				t.Errorf("release of %s: HGETALL calls: got %d, want 0 (no walk)", hold.owner, n)
			}
			if after := pttl(t, c, redisops.LockKey(name)); after > before || after < before-ttlSlack {
				t.Errorf("release of %s: lock PTTL: got %v, want it unchanged from %v", hold.owner, after, before)
			}
			expectNoMessage(t, c, ps, channel)
		}
		checkGone(t, c, redisops.ReadTimeoutKey(name, "B", 1))
		checkGone(t, c, redisops.ReadTimeoutKey(name, "A", 2))
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 1), shortLease)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "1"})

		// The last hold is shorter than the lock too, but no other holder is left: the walk runs,
		// finds nothing, and frees the lock.
		mustReadRelease(t, ops, name, "A", "r2", 0)
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, ps, channel)
	})

	t.Run("a sampled hold that ends with the lock spares the walk", func(t *testing.T) {
		// 32 readers with the same lease: the newest one leaving held the longest hold, so the fast path
		// does not apply, but any other reader's hold ends within 50 ms of the lock's expiry, which then
		// stands: the hold of a reader picked at random shows it, and no walk reads every hold.
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		const readers = 32
		for i := range readers {
			mustRead(t, ops, name, "R"+strconv.Itoa(i), midLease)
		}
		before := pttl(t, c, redisops.LockKey(name))
		resetStats(t, c)
		mustReadRelease(t, ops, name, "R"+strconv.Itoa(readers-1), "r", 0)
		if n := commandCalls(t, c, "hgetall"); n != 0 {
			t.Errorf("HGETALL calls: got %d, want 0 (no walk)", n)
		}
		if n := commandCalls(t, c, "hrandfield"); n != 1 {
			t.Errorf("HRANDFIELD calls: got %d, want 1", n)
		}
		// The released hold's, the lock's, and one or two sampled readers' (one of the two picked
		// fields may be mode).
		if n := commandCalls(t, c, "pttl"); n > 4 {
			t.Errorf("PTTL calls: got %d, want at most 4", n)
		}
		if after := pttl(t, c, redisops.LockKey(name)); after > before || after < before-ttlSlack {
			t.Errorf("lock PTTL: got %v, want it unchanged from %v", after, before)
		}
		expectNoMessage(t, c, ps, channel)
	})

	t.Run("many readers", func(t *testing.T) {
		// 32 readers with rising leases: every release but the last is of a shorter hold than the
		// lock's, and costs no walk.
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		const readers = 32
		leaseOf := func(i int) time.Duration { return shortLease + time.Duration(i)*100*time.Millisecond }
		for i := range readers {
			mustRead(t, ops, name, "R"+strconv.Itoa(i), leaseOf(i))
		}
		longest := leaseOf(readers - 1)
		checkPTTL(t, c, redisops.LockKey(name), longest)
		before := pttl(t, c, redisops.LockKey(name))

		resetStats(t, c)
		for i := range readers - 1 {
			mustReadRelease(t, ops, name, "R"+strconv.Itoa(i), "r"+strconv.Itoa(i), 0)
		}
		if n := commandCalls(t, c, "hgetall"); n != 0 {
			t.Errorf("HGETALL calls: got %d, want 0 (no walk)", n)
		}
		if n := commandCalls(t, c, "pttl"); n != 2*(readers-1) {
			t.Errorf("PTTL calls: got %d, want %d (two per release)", n, 2*(readers-1))
		}
		if after := pttl(t, c, redisops.LockKey(name)); after > before || after < before-ttlSlack {
			t.Errorf("lock PTTL: got %v, want it unchanged from %v", after, before)
		}
		last := "R" + strconv.Itoa(readers-1)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", last: "1"})
		expectNoMessage(t, c, ps, channel)

		mustReadRelease(t, ops, name, last, "rlast", 0)
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
	})

	t.Run("latest hold of a re-entrant reader", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "A", shortLease)
		mustRead(t, ops, name, "A", midLease)
		mustRead(t, ops, name, "B", shortLease)

		mustReadRelease(t, ops, name, "A", "r1", 1)
		checkGone(t, c, redisops.ReadTimeoutKey(name, "A", 2))
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 1), shortLease)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "1", "B": "1"})
		checkPTTL(t, c, redisops.LockKey(name), shortLease)
	})

	t.Run("last hold", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "B", lease)

		mustReadRelease(t, ops, name, "B", "r1", 0)
		expectNoMessage(t, c, ps, channel)
		mustReadRelease(t, ops, name, "A", "r2", 0)
		checkGone(t, c, redisops.LockKey(name))
		checkGone(t, c, redisops.ReadTimeoutKey(name, "A", 1))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, ps, channel)

		// The lock is free for a writer.
		mustWrite(t, ops, name, "W", lease)
	})

	t.Run("other holds ran out", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "A", longLease)
		mustRead(t, ops, name, "B", lease)
		// B's hold and A's first hold run out (their timeout keys expire) while the hash lives on; the
		// hash follows A's second, longest, hold (a shorter one would take the fast path).
		if err := c.Del(t.Context(), redisops.ReadTimeoutKey(name, "B", 1), redisops.ReadTimeoutKey(name, "A", 1)).Err(); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		got, err := ops.ReadRelease(t.Context(), name, "A", "r1", lease)
		if err != nil {
			t.Fatalf("ReadRelease: %v", err)
		}
		if got != (redisops.Released{}) {
			t.Errorf("ReadRelease: got %+v, want Remaining 0 (the lock was freed)", got)
		}
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
	})

	t.Run("downgraded writer", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustWrite(t, ops, name, "W", longLease)
		mustRead(t, ops, name, "W", shortLease)
		mustRead(t, ops, name, "W", shortLease)

		mustReadRelease(t, ops, name, "W", "r1", 1)
		mustReadRelease(t, ops, name, "W", "r2", 0)
		// The write lock stands with its own expiry; nothing was published.
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "1"})
		checkPTTL(t, c, redisops.LockKey(name), longLease)
		checkGone(t, c, redisops.ReadTimeoutKey(name, "W", 1))
		expectNoMessage(t, c, ps, channel)
	})
}

func TestWriteRelease(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("plain", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustWrite(t, ops, name, "W", longLease)
		mustWrite(t, ops, name, "W", longLease)

		// The hold left keeps its time: the release's shorter lease does not cut it.
		mustWriteRelease(t, ops, name, "W", "r1", 1)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "1"})
		checkPTTL(t, c, redisops.LockKey(name), 2*longLease)
		expectNoMessage(t, c, ps, channel)

		mustWriteRelease(t, ops, name, "W", "r2", 0)
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.ReadUnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.ReadUnlockMessage)
		}
		expectNoMessage(t, c, ps, channel)
		mustRead(t, ops, name, "R", lease)
	})

	t.Run("downgrade", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustWrite(t, ops, name, "W", lease)
		mustRead(t, ops, name, "W", shortLease)
		mustRead(t, ops, name, "W", midLease)

		mustWriteRelease(t, ops, name, "W", "r1", 0)
		// The lock switches to read mode and its expiry follows the longest read hold; "1" is
		// published so that waiting readers come in now.
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "W": "2"})
		checkPTTL(t, c, redisops.LockKey(name), midLease)
		if msg := nextMessage(t, ps); msg != redisops.ReadUnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.ReadUnlockMessage)
		}
		expectNoMessage(t, c, ps, channel)

		// Other readers may join now; writers may not.
		mustRead(t, ops, name, "R", shortLease)
		got, err := ops.WriteAcquire(t.Context(), name, "X", lease, redisops.UnknownHoldCount, 0)
		if err != nil {
			t.Fatalf("WriteAcquire: %v", err)
		}
		checkRefused(t, "WriteAcquire after downgrade", got, midLease)
		// The former writer is a plain reader now: it cannot take the write lock back.
		if _, err := ops.WriteAcquire(t.Context(), name, "W", lease, redisops.UnknownHoldCount, 0); !errors.Is(err, redisops.ErrUpgrade) {
			t.Errorf("WriteAcquire by the former writer: got %v, want %v", err, redisops.ErrUpgrade)
		}

		// Dropping W's longest hold makes the lock expire sooner: a waiting writer is told.
		mustReadRelease(t, ops, name, "W", "r2", 1)
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		mustReadRelease(t, ops, name, "W", "r3", 0)
		expectNoMessage(t, c, ps, channel)
		mustReadRelease(t, ops, name, "R", "r4", 0)
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
	})

	t.Run("downgrade to a shorter read hold", func(t *testing.T) {
		name := t.Name()
		mustWrite(t, ops, name, "W", longLease)
		mustRead(t, ops, name, "W", shortLease)
		mustWriteRelease(t, ops, name, "W", "r1", 0)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "W": "1"})
		checkPTTL(t, c, redisops.LockKey(name), shortLease)
	})

	t.Run("holds remain with read holds", func(t *testing.T) {
		name := t.Name()
		mustWrite(t, ops, name, "W", lease)
		mustWrite(t, ops, name, "W", lease)
		mustRead(t, ops, name, "W", longLease)
		// The release's lease does not cut the expiry below the read hold.
		mustWriteRelease(t, ops, name, "W", "r1", 1)
		checkPTTL(t, c, redisops.LockKey(name), longLease)
	})

	t.Run("downgraded holds ran out", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustWrite(t, ops, name, "W", lease)
		mustRead(t, ops, name, "W", lease)
		if err := c.Del(t.Context(), redisops.ReadTimeoutKey(name, "W", 1)).Err(); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		mustWriteRelease(t, ops, name, "W", "r1", 0)
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.ReadUnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.ReadUnlockMessage)
		}
	})
}

// TestReadReleaseSequenced: a read release whose owner's releases are sequenced (a known count and a
// request id "<prefix>:r<n>") keeps its answer in the owner's latch, overwritten by each release, and
// creates no latch of the request; a retry answers what the first run did, and a late copy of an older
// release, or of one that found no hold, changes nothing once the owner took its holds back.
func TestReadReleaseSequenced(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	release := func(name, req string) (redisops.Released, error) {
		return ops.ReadReleaseHeld(t.Context(), name, "A", req, lease, 1)
	}

	t.Run("retry", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "A", lease)
		for i := range 2 {
			if got, err := release(name, "q:r1"); err != nil || got != (redisops.Released{Remaining: 1}) {
				t.Fatalf("attempt %d = %+v, %v; want Remaining 1", i+1, got, err)
			}
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "1"})
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "A"), redisops.DefaultLatchExpiry)
		checkNoKey(t, c, redisops.UnlockLatchKey(name, "q:r1"))
	})

	t.Run("late copy", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "A", lease)
		if got, err := release(name, "q:r1"); err != nil || got != (redisops.Released{}) {
			t.Fatalf("release = %+v, %v; want Remaining 0", got, err)
		}
		mustRead(t, ops, name, "A", lease)
		if got, err := release(name, "q:r2"); err != nil || got != (redisops.Released{}) {
			t.Fatalf("second release = %+v, %v; want Remaining 0", got, err)
		}
		mustRead(t, ops, name, "A", lease)
		before := snapshot(t, c)
		if _, err := release(name, "q:r1"); !errors.Is(err, redisops.ErrStaleRelease) {
			t.Errorf("late copy: got error %v, want %v", err, redisops.ErrStaleRelease)
		}
		if after := snapshot(t, c); !maps.Equal(before, after) {
			t.Errorf("the late copy changed Redis:\nbefore %q\nafter  %q", before, after)
		}
	})

	t.Run("late copy of a release that found no hold", func(t *testing.T) {
		name := t.Name()
		if _, err := release(name, "q:r3"); !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("release of no hold: got error %v, want %v", err, redisops.ErrNotHeld)
		}
		mustRead(t, ops, name, "A", lease)
		if _, err := release(name, "q:r3"); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("late copy: got error %v, want the stored %v", err, redisops.ErrNotHeld)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "1"})
	})

	t.Run("refused on a hold key of another type", func(t *testing.T) {
		// The latch is written before the hold's key is found to be of another type: it is put back
		// as it was, with the answer of the release before.
		name := t.Name()
		mustRead(t, ops, name, "A", lease)
		if got, err := release(name, "q:r1"); err != nil || got != (redisops.Released{}) {
			t.Fatalf("release = %+v, %v; want Remaining 0", got, err)
		}
		mustRead(t, ops, name, "A", lease)
		holdKey := redisops.ReadTimeoutKey(name, "A", 1)
		if err := c.Del(t.Context(), holdKey).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HSet(t.Context(), holdKey, "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, c)
		if _, err := release(name, "q:r2"); !errors.Is(err, redisops.ErrWrongType) {
			t.Errorf("release: got error %v, want %v", err, redisops.ErrWrongType)
		}
		if after := snapshot(t, c); !maps.Equal(before, after) {
			t.Errorf("the refused release changed Redis:\nbefore %q\nafter  %q", before, after)
		}
	})

	t.Run("unknown count", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "A", lease)
		if got, err := ops.ReadReleaseHeld(t.Context(), name, "A", "q:r4", lease, redisops.UnknownHoldCount); err != nil || got != (redisops.Released{}) {
			t.Fatalf("release = %+v, %v; want Remaining 0", got, err)
		}
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "q:r4"), redisops.DefaultLatchExpiry)
		checkNoKey(t, c, redisops.UnlockLatchKey(name, "A"))
	})
}

func TestRWReleaseRetry(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("read, holds remain", func(t *testing.T) {
		name := t.Name()
		for range 3 {
			mustRead(t, ops, name, "A", lease)
		}
		for i := range 2 {
			got, err := ops.ReadRelease(t.Context(), name, "A", "req", lease)
			if err != nil || got != (redisops.Released{Remaining: 2}) {
				t.Fatalf("ReadRelease attempt %d = %+v, %v; want Remaining 2", i+1, got, err)
			}
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "2"})
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 2), lease)
		checkPTTL(t, c, redisops.UnlockLatchKey(name, "req"), redisops.DefaultLatchExpiry)
	})

	t.Run("read, last hold", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustRead(t, ops, name, "A", lease)
		for i := range 2 {
			got, err := ops.ReadRelease(t.Context(), name, "A", "req", lease)
			if err != nil || got != (redisops.Released{}) {
				t.Fatalf("ReadRelease attempt %d = %+v, %v; want Remaining 0", i+1, got, err)
			}
		}
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		expectNoMessage(t, c, ps, channel)
	})

	t.Run("write", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustWrite(t, ops, name, "W", lease)
		mustWrite(t, ops, name, "W", lease)
		for _, want := range []int64{1, 0} {
			req := "req" + strconv.FormatInt(want, 10)
			for i := range 2 {
				got, err := ops.WriteRelease(t.Context(), name, "W", req, lease)
				if err != nil || got != (redisops.Released{Remaining: want}) {
					t.Fatalf("WriteRelease %s attempt %d = %+v, %v; want Remaining %d", req, i+1, got, err, want)
				}
			}
		}
		checkGone(t, c, redisops.LockKey(name))
		if msg := nextMessage(t, ps); msg != redisops.ReadUnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.ReadUnlockMessage)
		}
		expectNoMessage(t, c, ps, channel)
		// After another writer took the lock, a retry still gets the stored answer and changes nothing.
		mustWrite(t, ops, name, "X", lease)
		got, err := ops.WriteRelease(t.Context(), name, "W", "req0", lease)
		if err != nil || got != (redisops.Released{}) {
			t.Fatalf("late retry = %+v, %v; want Remaining 0", got, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "X:write": "1"})
	})
}

func TestRWReleaseNotHeld(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	readLocked := t.Name() + "/read"
	writeLocked := t.Name() + "/write"
	free := t.Name() + "/free"
	mustRead(t, ops, readLocked, "A", lease)
	mustWrite(t, ops, writeLocked, "W", lease)

	tests := []struct {
		desc  string
		lock  string
		owner string
		write bool
	}{
		{"read release by a non-reader", readLocked, "B", false},
		{"write release by a reader", readLocked, "A", true},
		{"write release on a read-locked lock", readLocked, "B", true},
		{"read release by the writer without read holds", writeLocked, "W", false},
		{"read release by another owner", writeLocked, "B", false},
		{"write release by a non-writer", writeLocked, "B", true},
		{"read release of a free lock", free, "A", false},
		{"write release of a free lock", free, "A", true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			channel := redisops.RWChannelName(tt.lock)
			ps := subscribe(t, c, channel)
			req := "req-" + t.Name()
			var err error
			if tt.write {
				_, err = ops.WriteRelease(t.Context(), tt.lock, tt.owner, req, lease)
			} else {
				_, err = ops.ReadRelease(t.Context(), tt.lock, tt.owner, req, lease)
			}
			if !errors.Is(err, redisops.ErrNotHeld) {
				t.Fatalf("got error %v, want %v", err, redisops.ErrNotHeld)
			}
			checkGone(t, c, redisops.UnlockLatchKey(tt.lock, req))
			expectNoMessage(t, c, ps, channel)
		})
	}
	checkHash(t, c, readLocked, map[string]string{"mode": "read", "A": "1"})
	checkPTTL(t, c, readLocked, lease)
	checkPTTL(t, c, redisops.ReadTimeoutKey(readLocked, "A", 1), lease)
	checkHash(t, c, writeLocked, map[string]string{"mode": "write", "W:write": "1"})
	checkPTTL(t, c, writeLocked, lease)
	checkGone(t, c, free)
}

func TestReadRenew(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("reader", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "A", shortLease)
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "B", shortLease)
		if err := ops.ReadRenew(t.Context(), name, "A", longLease); err != nil {
			t.Fatalf("ReadRenew: %v", err)
		}
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 1), longLease)
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 2), longLease)
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "B", 1), shortLease)
		checkPTTL(t, c, redisops.LockKey(name), longLease)

		// A shorter renewal of B does not cut the hash's expiry below A's holds.
		if err := ops.ReadRenew(t.Context(), name, "B", midLease); err != nil {
			t.Fatalf("ReadRenew: %v", err)
		}
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "B", 1), midLease)
		checkPTTL(t, c, redisops.LockKey(name), longLease)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "2", "B": "1"})
	})

	t.Run("downgraded writer", func(t *testing.T) {
		name := t.Name()
		mustWrite(t, ops, name, "W", lease)
		mustRead(t, ops, name, "W", shortLease)
		if err := ops.ReadRenew(t.Context(), name, "W", longLease); err != nil {
			t.Fatalf("ReadRenew: %v", err)
		}
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "W", 1), longLease)
		checkPTTL(t, c, redisops.LockKey(name), longLease)
	})

	t.Run("not held", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "A", lease)
		for _, tt := range []struct{ lock, owner string }{
			{name, "B"},
			{t.Name() + "/free", "A"},
		} {
			if err := ops.ReadRenew(t.Context(), tt.lock, tt.owner, longLease); !errors.Is(err, redisops.ErrNotHeld) {
				t.Errorf("ReadRenew(%q, %q): got %v, want %v", tt.lock, tt.owner, err, redisops.ErrNotHeld)
			}
		}
		writeLocked := t.Name() + "/write"
		mustWrite(t, ops, writeLocked, "W", lease)
		if err := ops.ReadRenew(t.Context(), writeLocked, "W", longLease); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("ReadRenew by a writer without read holds: got %v, want %v", err, redisops.ErrNotHeld)
		}
		checkPTTL(t, c, writeLocked, lease)
		checkPTTL(t, c, redisops.LockKey(name), lease)
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 1), lease)
	})

	t.Run("a hold ran out", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "B", lease)
		if err := c.Del(t.Context(), redisops.ReadTimeoutKey(name, "A", 1)).Err(); err != nil {
			t.Fatalf("DEL: %v", err)
		}
		if err := ops.ReadRenew(t.Context(), name, "A", longLease); !errors.Is(err, redisops.ErrNotHeld) {
			t.Fatalf("ReadRenew after a hold ran out: got %v, want %v", err, redisops.ErrNotHeld)
		}
		// Nothing was renewed.
		checkPTTL(t, c, redisops.ReadTimeoutKey(name, "A", 2), lease)
		checkPTTL(t, c, redisops.LockKey(name), lease)
	})
}

func TestWriteRenew(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("writer", func(t *testing.T) {
		name := t.Name()
		mustWrite(t, ops, name, "W", lease)
		if err := ops.WriteRenew(t.Context(), name, "W", longLease); err != nil {
			t.Fatalf("WriteRenew: %v", err)
		}
		checkPTTL(t, c, redisops.LockKey(name), longLease)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "1"})
	})

	t.Run("writer with longer read holds", func(t *testing.T) {
		name := t.Name()
		mustWrite(t, ops, name, "W", lease)
		mustRead(t, ops, name, "W", longLease)
		if err := ops.WriteRenew(t.Context(), name, "W", lease); err != nil {
			t.Fatalf("WriteRenew: %v", err)
		}
		checkPTTL(t, c, redisops.LockKey(name), longLease)
	})

	t.Run("not held", func(t *testing.T) {
		name := t.Name()
		mustWrite(t, ops, name, "W", lease)
		readLocked := t.Name() + "/read"
		mustRead(t, ops, readLocked, "A", lease)
		for _, tt := range []struct{ lock, owner string }{
			{name, "B"},
			{readLocked, "A"},
			{t.Name() + "/free", "W"},
		} {
			if err := ops.WriteRenew(t.Context(), tt.lock, tt.owner, longLease); !errors.Is(err, redisops.ErrNotHeld) {
				t.Errorf("WriteRenew(%q, %q): got %v, want %v", tt.lock, tt.owner, err, redisops.ErrNotHeld)
			}
		}
		checkPTTL(t, c, redisops.LockKey(name), lease)
		checkPTTL(t, c, readLocked, lease)
		checkGone(t, c, t.Name()+"/free")
	})
}

func TestRWForceUnlock(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("read-locked", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "A", lease)
		mustRead(t, ops, name, "B", lease)

		ok, err := ops.ForceUnlockWrite(t.Context(), name)
		if err != nil || ok {
			t.Fatalf("ForceUnlockWrite of a read-locked lock = %v, %v; want false", ok, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "A": "2", "B": "1"})
		expectNoMessage(t, c, ps, channel)

		ok, err = ops.ForceUnlockRead(t.Context(), name)
		if err != nil || !ok {
			t.Fatalf("ForceUnlockRead = %v, %v; want true", ok, err)
		}
		checkGone(t, c, redisops.LockKey(name))
		for _, k := range []string{
			redisops.ReadTimeoutKey(name, "A", 1),
			redisops.ReadTimeoutKey(name, "A", 2),
			redisops.ReadTimeoutKey(name, "B", 1),
		} {
			checkGone(t, c, k)
		}
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		if _, err := ops.ReadRelease(t.Context(), name, "A", "r1", lease); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("ReadRelease after ForceUnlockRead: got %v, want %v", err, redisops.ErrNotHeld)
		}
	})

	t.Run("write-locked", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustWrite(t, ops, name, "W", lease)
		mustRead(t, ops, name, "W", lease)

		ok, err := ops.ForceUnlockRead(t.Context(), name)
		if err != nil || ok {
			t.Fatalf("ForceUnlockRead of a write-locked lock = %v, %v; want false", ok, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "W:write": "1", "W": "1"})
		expectNoMessage(t, c, ps, channel)

		ok, err = ops.ForceUnlockWrite(t.Context(), name)
		if err != nil || !ok {
			t.Fatalf("ForceUnlockWrite = %v, %v; want true", ok, err)
		}
		checkGone(t, c, redisops.LockKey(name))
		checkGone(t, c, redisops.ReadTimeoutKey(name, "W", 1))
		if msg := nextMessage(t, ps); msg != redisops.ReadUnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.ReadUnlockMessage)
		}
		if _, err := ops.WriteRelease(t.Context(), name, "W", "r1", lease); !errors.Is(err, redisops.ErrNotHeld) {
			t.Errorf("WriteRelease after ForceUnlockWrite: got %v, want %v", err, redisops.ErrNotHeld)
		}
	})

	t.Run("free", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		for _, f := range []func() (bool, error){
			func() (bool, error) { return ops.ForceUnlockRead(t.Context(), name) },
			func() (bool, error) { return ops.ForceUnlockWrite(t.Context(), name) },
		} {
			if ok, err := f(); err != nil || ok {
				t.Errorf("force unlock of a free lock = %v, %v; want false", ok, err)
			}
		}
		expectNoMessage(t, c, ps, channel)
	})
}

func TestRWStatus(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	readLocked := t.Name() + "/read"
	mustRead(t, ops, readLocked, "A", lease)
	mustRead(t, ops, readLocked, "A", lease)
	mustRead(t, ops, readLocked, "B", lease)
	writeLocked := t.Name() + "/write"
	mustWrite(t, ops, writeLocked, "W", lease)
	mustWrite(t, ops, writeLocked, "W", lease)
	mustRead(t, ops, writeLocked, "W", lease)
	noExpiry := t.Name() + "/noexpiry"
	if err := c.HSet(t.Context(), noExpiry, "mode", "read", "A", 1).Err(); err != nil {
		t.Fatalf("HSET: %v", err)
	}

	tests := []struct {
		name   string
		lock   string
		owner  string
		mode   string
		reads  int64
		writes int64
		ttl    time.Duration // exact when negative, else about
	}{
		{"free", t.Name() + "/free", "A", "", 0, 0, -2},
		{"free, empty owner", t.Name() + "/free", "", "", 0, 0, -2},
		{"read, reader", readLocked, "A", "read", 2, 0, lease},
		{"read, other reader", readLocked, "B", "read", 1, 0, lease},
		{"read, non-holder", readLocked, "C", "read", 0, 0, lease},
		{"read, empty owner", readLocked, "", "read", 0, 0, lease},
		// The write re-entry added its lease to the time left.
		{"write, writer", writeLocked, "W", "write", 1, 2, 2 * lease},
		{"write, other owner", writeLocked, "B", "write", 0, 0, 2 * lease},
		{"no expiry", noExpiry, "A", "read", 1, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ops.RWStatus(t.Context(), tt.lock, tt.owner)
			if err != nil {
				t.Fatalf("RWStatus: %v", err)
			}
			if got.Mode != tt.mode || got.ReadHolds != tt.reads || got.WriteHolds != tt.writes || got.WriteIntent != "" {
				t.Errorf("RWStatus: got %+v, want Mode %q, ReadHolds %d, WriteHolds %d, no WriteIntent", got, tt.mode, tt.reads, tt.writes)
			}
			if tt.ttl < 0 {
				if got.TTL != tt.ttl {
					t.Errorf("RWStatus TTL: got %d, want %d", got.TTL, tt.ttl)
				}
			} else if got.TTL <= tt.ttl-ttlSlack || got.TTL > tt.ttl {
				t.Errorf("RWStatus TTL: got %v, want about %v", got.TTL, tt.ttl)
			}
		})
	}
}

// intentOf returns the owner id held by the write intent of name, or "" when there is none.
func intentOf(t *testing.T, c *redis.Client, name string) string {
	t.Helper()
	v, err := c.Get(t.Context(), redisops.WriteIntentKey(name)).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("GET write intent: %v", err)
	}
	return v
}

// checkIntent fails unless the write intent of name holds owner, with a PTTL of about ttl.
func checkIntent(t *testing.T, c *redis.Client, name, owner string, ttl time.Duration) {
	t.Helper()
	if got := intentOf(t, c, name); got != owner {
		t.Fatalf("write intent: got %q, want %q", got, owner)
	}
	checkPTTL(t, c, redisops.WriteIntentKey(name), ttl)
}

// writeRefused asks for the write lock for owner with the given intent and fails unless it is refused
// with a TTL of about want.
func writeRefused(t *testing.T, ops *redisops.Ops, name, owner string, intent, want time.Duration) {
	t.Helper()
	got, err := ops.WriteAcquire(t.Context(), name, owner, lease, redisops.UnknownHoldCount, intent)
	if err != nil {
		t.Fatalf("WriteAcquire(%q, %q): %v", name, owner, err)
	}
	checkRefused(t, "WriteAcquire by "+owner, got, want)
}

// readRefused asks for a read hold for owner and fails unless it is refused with a TTL of about want,
// leaving no trace of owner in the hash nor a timeout key.
func readRefused(t *testing.T, ops *redisops.Ops, c *redis.Client, name, owner string, want time.Duration) {
	t.Helper()
	got, err := ops.ReadAcquire(t.Context(), name, owner, longLease, redisops.UnknownHoldCount)
	if err != nil {
		t.Fatalf("ReadAcquire(%q, %q): %v", name, owner, err)
	}
	checkRefused(t, "ReadAcquire by "+owner, got, want)
	if ok, err := c.HExists(t.Context(), redisops.LockKey(name), owner).Result(); err != nil || ok {
		t.Errorf("HEXISTS %q: got %v, %v; want false", owner, ok, err)
	}
	checkGone(t, c, redisops.ReadTimeoutKey(name, owner, 1))
}

func TestWriteIntent(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)

	t.Run("set on a read-mode refusal", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		checkIntent(t, c, name, "W", midLease)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "R": "1"})
		checkToken(t, c, name, 0)
	})

	t.Run("not with intent 0", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", 0, lease)
		checkGone(t, c, redisops.WriteIntentKey(name))
		mustRead(t, ops, name, "N", lease)
	})

	t.Run("not when refused by a writer", func(t *testing.T) {
		name := t.Name()
		mustWrite(t, ops, name, "X", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		checkGone(t, c, redisops.WriteIntentKey(name))
		// Nor by a writer that downgraded (the lock is still write-locked).
		mustRead(t, ops, name, "X", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		checkGone(t, c, redisops.WriteIntentKey(name))
	})

	t.Run("not on an upgrade", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		mustRead(t, ops, name, "S", lease)
		if _, err := ops.WriteAcquire(t.Context(), name, "R", lease, redisops.UnknownHoldCount, midLease); !errors.Is(err, redisops.ErrUpgrade) {
			t.Fatalf("WriteAcquire by a reader: got %v, want %v", err, redisops.ErrUpgrade)
		}
		checkGone(t, c, redisops.WriteIntentKey(name))
	})

	t.Run("the first waiting writer keeps its place", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W1", midLease, lease)
		writeRefused(t, ops, name, "W2", longLease, lease)
		checkIntent(t, c, name, "W1", midLease)
	})

	t.Run("refresh keeps the owner", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", shortLease, lease)
		checkIntent(t, c, name, "W", shortLease)
		writeRefused(t, ops, name, "W", longLease, lease)
		checkIntent(t, c, name, "W", longLease)
		// A refresh with intent 0 sets nothing, and leaves the intent as it is.
		writeRefused(t, ops, name, "W", 0, lease)
		checkIntent(t, c, name, "W", longLease)
	})

	t.Run("new readers are refused", func(t *testing.T) {
		name := t.Name()
		channel := redisops.RWChannelName(name)
		ps := subscribe(t, c, channel)
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", midLease, lease)

		// Read-locked: a new reader is told to wait for the intent, not for the lock.
		readRefused(t, ops, c, name, "N", midLease)
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "R": "1"})
		checkPTTL(t, c, redisops.LockKey(name), lease)
		// With a known hold count too.
		got, err := ops.ReadAcquire(t.Context(), name, "N", lease, 0)
		if err != nil {
			t.Fatalf("ReadAcquire: %v", err)
		}
		checkRefused(t, "ReadAcquire with a known count", got, midLease)

		// Free: still refused, and the lock stays free.
		mustReadRelease(t, ops, name, "R", "r1", 0)
		if msg := nextMessage(t, ps); msg != redisops.UnlockMessage {
			t.Errorf("message: got %q, want %q", msg, redisops.UnlockMessage)
		}
		readRefused(t, ops, c, name, "N", midLease)
		checkGone(t, c, redisops.LockKey(name))
		// The intent's owner itself may read.
		mustRead(t, ops, name, "W", lease)
	})

	t.Run("re-entries and downgrades are allowed", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		if got := mustRead(t, ops, name, "R", lease); got.HoldCount != 2 {
			t.Errorf("re-entering ReadAcquire: got %+v, want HoldCount 2", got)
		}
		// A replayed acquisition (reply lost) answers as before.
		got, err := ops.ReadAcquire(t.Context(), name, "R", lease, 1)
		if err != nil || got != (redisops.Acquired{OK: true, HoldCount: 2}) {
			t.Fatalf("replayed ReadAcquire = %+v, %v; want count 2", got, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "R": "2"})

		// Another writer takes the lock once the readers left; W's intent stays, and that writer
		// may still take read holds (a downgrade).
		mustReadRelease(t, ops, name, "R", "r1", 1)
		mustReadRelease(t, ops, name, "R", "r2", 0)
		mustWrite(t, ops, name, "X", lease)
		checkIntent(t, c, name, "W", midLease)
		if got := mustRead(t, ops, name, "X", lease); got.HoldCount != 1 {
			t.Errorf("downgrade ReadAcquire: got %+v, want HoldCount 1", got)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "write", "X:write": "1", "X": "1"})
		// X's re-entering read hold after its write lock went is allowed too.
		mustWriteRelease(t, ops, name, "X", "r3", 0)
		if got := mustRead(t, ops, name, "X", lease); got.HoldCount != 2 {
			t.Errorf("re-entering ReadAcquire after the downgrade: got %+v, want HoldCount 2", got)
		}
		readRefused(t, ops, c, name, "N", midLease)
	})

	t.Run("success clears the own intent", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		mustReadRelease(t, ops, name, "R", "r1", 0)
		got, err := ops.WriteAcquire(t.Context(), name, "W", lease, 0, midLease)
		if err != nil || got != (redisops.Acquired{OK: true, HoldCount: 1, Token: 1}) {
			t.Fatalf("WriteAcquire = %+v, %v; want count 1, token 1", got, err)
		}
		checkGone(t, c, redisops.WriteIntentKey(name))

		// A replay and a re-entry clear it too (here set by hand: a writer does not leave one while
		// it holds the lock).
		for _, held := range []int64{0, 1} {
			if err := c.Set(t.Context(), redisops.WriteIntentKey(name), "W", midLease).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			if _, err := ops.WriteAcquire(t.Context(), name, "W", lease, held, 0); err != nil {
				t.Fatalf("WriteAcquire (held %d): %v", held, err)
			}
			checkGone(t, c, redisops.WriteIntentKey(name))
		}
	})

	t.Run("success leaves another's intent", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		mustReadRelease(t, ops, name, "R", "r1", 0)
		mustWrite(t, ops, name, "X", lease)
		checkIntent(t, c, name, "W", midLease)
	})

	t.Run("ClearWriteIntent clears only its own", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		if ok, err := ops.ClearWriteIntent(t.Context(), name, "X"); err != nil || ok {
			t.Fatalf("ClearWriteIntent by another owner = %v, %v; want false", ok, err)
		}
		checkIntent(t, c, name, "W", midLease)
		if ok, err := ops.ClearWriteIntent(t.Context(), name, "W"); err != nil || !ok {
			t.Fatalf("ClearWriteIntent = %v, %v; want true", ok, err)
		}
		checkGone(t, c, redisops.WriteIntentKey(name))
		if ok, err := ops.ClearWriteIntent(t.Context(), name, "W"); err != nil || ok {
			t.Fatalf("second ClearWriteIntent = %v, %v; want false", ok, err)
		}
		mustRead(t, ops, name, "N", lease)
	})

	t.Run("the intent expires by itself", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", 100*time.Millisecond, lease)
		if intentOf(t, c, name) != "W" {
			t.Fatalf("write intent: got %q, want %q", intentOf(t, c, name), "W")
		}
		time.Sleep(200 * time.Millisecond)
		checkGone(t, c, redisops.WriteIntentKey(name))
		mustRead(t, ops, name, "N", lease)
	})

	t.Run("force unlocks leave it alone", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		if ok, err := ops.ForceUnlockRead(t.Context(), name); err != nil || !ok {
			t.Fatalf("ForceUnlockRead = %v, %v; want true", ok, err)
		}
		checkIntent(t, c, name, "W", midLease)
		mustWrite(t, ops, name, "X", lease)
		if ok, err := ops.ForceUnlockWrite(t.Context(), name); err != nil || !ok {
			t.Fatalf("ForceUnlockWrite = %v, %v; want true", ok, err)
		}
		checkIntent(t, c, name, "W", midLease)
	})

	t.Run("RWStatus shows it", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		st, err := ops.RWStatus(t.Context(), name, "R")
		if err != nil || st.WriteIntent != "" {
			t.Fatalf("RWStatus = %+v, %v; want no WriteIntent", st, err)
		}
		writeRefused(t, ops, name, "W", midLease, lease)
		for _, owner := range []string{"R", "W", ""} {
			st, err := ops.RWStatus(t.Context(), name, owner)
			if err != nil || st.WriteIntent != "W" || st.Mode != "read" {
				t.Fatalf("RWStatus(%q) = %+v, %v; want Mode read, WriteIntent W", owner, st, err)
			}
		}
		// On a free lock too.
		mustReadRelease(t, ops, name, "R", "r1", 0)
		st, err = ops.RWStatus(t.Context(), name, "")
		if err != nil || st != (redisops.RWStatus{TTL: -2, WriteIntent: "W"}) {
			t.Fatalf("RWStatus of a free lock = %+v, %v; want TTL -2, WriteIntent W", st, err)
		}
	})

	t.Run("batched read acquires are refused", func(t *testing.T) {
		name := t.Name()
		mustRead(t, ops, name, "R", lease)
		writeRefused(t, ops, name, "W", midLease, lease)
		b := ops.NewBatch()
		newReader := b.ReadAcquire(redisops.RWNamesOf(name), "N", lease, 0)
		reentry := b.ReadAcquire(redisops.RWNamesOf(name), "R", lease, 1)
		b.Exec(t.Context())
		got, err := newReader()
		if err != nil {
			t.Fatalf("batched ReadAcquire by a new reader: %v", err)
		}
		checkRefused(t, "batched ReadAcquire by a new reader", got, midLease)
		if got, err := reentry(); err != nil || got != (redisops.Acquired{OK: true, HoldCount: 2}) {
			t.Fatalf("batched re-entering ReadAcquire = %+v, %v; want count 2", got, err)
		}
		checkHash(t, c, redisops.LockKey(name), map[string]string{"mode": "read", "R": "2"})
	})
}

// scriptCommands returns how many commands the server ran since the last CONFIG RESETSTAT, leaving out
// the script calls themselves (EVAL, EVALSHA, SCRIPT) and INFO and CONFIG: the commands that scripts
// ran, when nothing else runs.
func scriptCommands(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "eval"), strings.HasPrefix(name, "script"), name == "info",
			strings.HasPrefix(name, "config"):
			continue
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}

// TestReadScriptCommands: the common paths of a read acquire and a read release run few commands in
// Redis (it is the shared resource of many readers of one name): no key's type is read, the owner's
// count and the kind check are one HMGET, the hold key's type is checked by its first write, and a
// release reads and writes its latch with one command.
func TestReadScriptCommands(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	ctx := t.Context()
	name := t.Name()
	count := func(what string, most int64, fn func()) {
		t.Helper()
		resetStats(t, c)
		fn()
		n := scriptCommands(t, c)
		t.Logf("%s: %d commands in Redis", what, n)
		if n > most {
			t.Errorf("%s: %d commands in Redis, want at most %d", what, n, most)
		}
	}
	// HMGET, GET intent, SET ... GET hold, HSET, PEXPIRE ... NX.
	count("first reader", 5, func() { mustRead(t, ops, name, "A", midLease) })
	// HMGET, GET intent, SET ... GET hold, HSET, PTTL, and PEXPIRE when a millisecond has passed.
	count("another reader joins", 6, func() { mustRead(t, ops, name, "B", midLease) })
	// HMGET, SET ... GET hold, HSET, PTTL, and PEXPIRE when a millisecond has passed.
	count("re-entry", 5, func() {
		if got, err := ops.ReadAcquire(ctx, name, "B", midLease, 1); err != nil || got.HoldCount != 2 {
			t.Fatalf("ReadAcquire re-entry = %+v, %v; want count 2", got, err)
		}
	})
	mustRead(t, ops, name, "C", shortLease)
	// HMGET, PTTL hold, SET ... NX GET latch, GETDEL hold, HDEL, PTTL lock, HLEN: a shorter hold.
	count("a reader leaves, others remain (shorter hold)", 7, func() { mustReadRelease(t, ops, name, "C", "r1", 0) })
	// HMGET, PTTL hold, SET ... NX GET latch, GETDEL hold, HSET, PTTL lock, HRANDFIELD, up to two PTTL.
	count("a reader leaves, others remain (longest hold)", 9, func() { mustReadRelease(t, ops, name, "B", "r2", 1) })
	mustReadRelease(t, ops, name, "B", "r3", 0)
	// HMGET, PTTL hold, SET ... NX GET latch, GETDEL hold, HDEL, PTTL lock, HLEN, HRANDFIELD, DEL, PUBLISH.
	count("the last reader leaves", 10, func() { mustReadRelease(t, ops, name, "A", "r4", 0) })
	checkGone(t, c, redisops.LockKey(name))
}

// TestReadAcquireRaisesExpiry: a read hold raises the hash's expiry to its lease when it is shorter or
// absent (a hash left without one), and never cuts it.
func TestReadAcquireRaisesExpiry(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	key := redisops.LockKey(name)
	mustRead(t, ops, name, "A", midLease)
	mustRead(t, ops, name, "B", shortLease)
	checkPTTL(t, c, key, midLease)
	if err := c.Persist(t.Context(), key).Err(); err != nil {
		t.Fatalf("PERSIST: %v", err)
	}
	mustRead(t, ops, name, "C", shortLease)
	checkPTTL(t, c, key, shortLease)
	mustRead(t, ops, name, "B", midLease)
	checkPTTL(t, c, key, midLease)
}
