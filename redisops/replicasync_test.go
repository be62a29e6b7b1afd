package redisops_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

// syncTimeout is the WAIT timeout of these tests: short, so that a paused replica costs little.
const syncTimeout = 300 * time.Millisecond

// startWithReplica starts a master and one replica of it, waits until the replica is in sync, and
// returns both servers and a client on the master.
func startWithReplica(t *testing.T, masterArgs ...string) (master, replica *redistest.Server, client *redis.Client) {
	t.Helper()
	master = redistest.Start(t, redistest.WithArgs(append([]string{"--repl-diskless-sync-delay", "0"}, masterArgs...)...))
	replica = redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(master.Port()),
		"--repl-diskless-sync-delay", "0"))
	client = master.Client(t)
	waitReplicaInSync(t, client)
	return master, replica, client
}

// waitReplicaInSync writes a probe key and polls the master's INFO replication until a replica is
// online and has acknowledged everything the master wrote, for 15 s at most. ("online" alone is not
// enough: a replica that just went online acknowledges nothing for the better part of a second.)
func waitReplicaInSync(t *testing.T, master *redis.Client) {
	t.Helper()
	if err := master.Set(t.Context(), "replicasync:probe", "1", 0).Err(); err != nil {
		t.Fatalf("SET probe: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := master.Info(t.Context(), "replication").Result()
		if err == nil && replicaInSync(info) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica in sync within 15s: %q, %v", info, err)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for an event
	}
}

var (
	replicaLineRE  = regexp.MustCompile(`slave\d+:.*state=online,offset=(\d+)`)
	masterOffsetRE = regexp.MustCompile(`master_repl_offset:(\d+)`)
)

// replicaInSync reports whether the INFO replication text shows an online replica whose acknowledged
// offset has reached the master's.
func replicaInSync(info string) bool {
	m, r := masterOffsetRE.FindStringSubmatch(info), replicaLineRE.FindStringSubmatch(info)
	if m == nil || r == nil {
		return false
	}
	master, _ := strconv.Atoi(m[1])
	replica, _ := strconv.Atoi(r[1])
	return replica > 0 && replica >= master
}

var waitCallsRE = regexp.MustCompile(`cmdstat_wait:calls=(\d+)`)

// waitCalls returns how many WAIT commands the server behind c has run.
func waitCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	m := waitCallsRE.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// loadScripts loads every script, so that a test counts the round trips of its calls only.
func loadScripts(t *testing.T, c *redis.Client) {
	t.Helper()
	for name, s := range redisops.Scripts() {
		if err := s.Load(t.Context(), c).Err(); err != nil {
			t.Fatalf("loading %s: %v", name, err)
		}
	}
}

// waitHook counts the WAIT commands a client sends, pipelined or not.
type waitHook struct{ n atomic.Int64 }

func (h *waitHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *waitHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "wait" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *waitHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "wait" {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// syncedOps returns an Ops on client with the replica-sync safeguard on (1 replica, syncTimeout).
func syncedOps(client redis.Scripter) *redisops.Ops {
	ops := redisops.New(client)
	ops.SetReplicaSync(1, syncTimeout)
	return ops
}

// TestReplicaSyncHealthyReplica: with a replica in sync, every script that gives a hold is followed by
// one WAIT, the holds are granted as without the safeguard, and scripts that give nothing send none.
func TestReplicaSyncHealthyReplica(t *testing.T) {
	_, _, client := startWithReplica(t)
	ops := syncedOps(client)
	ctx := t.Context()
	const name = "replicasync:healthy"
	loadScripts(t, client)

	before := waitCalls(t, client)
	steps := []struct {
		what  string
		grant func() (redisops.Acquired, error)
	}{
		{"acquire", func() (redisops.Acquired, error) { return ops.Acquire(ctx, name, "a", lease, 0) }},
		{"re-entry", func() (redisops.Acquired, error) { return ops.Acquire(ctx, name, "a", lease, 1) }},
		{"fair acquire", func() (redisops.Acquired, error) {
			return ops.FairAcquire(ctx, name+":fair", "a", lease, time.Minute, 0, true)
		}},
		{"write acquire", func() (redisops.Acquired, error) { return ops.WriteAcquire(ctx, name+":rw", "w", lease, 0, 0) }},
		{"read acquire", func() (redisops.Acquired, error) { return ops.ReadAcquire(ctx, name+":rw", "w", lease, 0) }},
	}
	for i, s := range steps {
		got, err := s.grant()
		if err != nil || !got.OK {
			t.Fatalf("%s = %+v, %v; want a hold", s.what, got, err)
		}
		if n := waitCalls(t, client) - before; n != i+1 {
			t.Fatalf("after %s: %d WAITs, want %d", s.what, n, i+1)
		}
	}
	if _, err := ops.Release(ctx, name, "a", "healthy-1", lease, nil); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := waitCalls(t, client) - before; n != len(steps) {
		t.Errorf("a release without handoff sent a WAIT: %d WAITs, want %d", n, len(steps))
	}
	rel, err := ops.Release(ctx, name, "a", "healthy-2", lease, &redisops.Handoff{Owner: "b", Lease: lease})
	if err != nil || !rel.HandedOff || rel.NotSynced != nil {
		t.Fatalf("Release with handoff = %+v, %v; want handed off", rel, err)
	}
	if n := waitCalls(t, client) - before; n != len(steps)+1 {
		t.Errorf("a release with handoff: %d WAITs, want %d", n, len(steps)+1)
	}
	checkHash(t, client, name, map[string]string{"b": "1"})
}

// TestReplicaSyncPausedReplica: with the replica paused, WAIT times out, and every hold the scripts
// give is given back at once: the call fails with ErrNotSynced after about the sync timeout and
// nothing of the hold stays in Redis. A re-entry drops back to the count before it; a handoff is
// reported in NotSynced while the release itself stands.
func TestReplicaSyncPausedReplica(t *testing.T) {
	_, replica, client := startWithReplica(t)
	ops := syncedOps(client)
	ctx := t.Context()
	const name = "replicasync:paused"
	mustAcquire(t, ops, name+":held", "a", lease) // in sync: taken before the pause
	replica.Pause()
	t.Cleanup(replica.Resume)

	notSynced := func(what string, call func() error) {
		t.Helper()
		start := time.Now()
		err := call()
		took := time.Since(start)
		if !errors.Is(err, redisops.ErrNotSynced) {
			t.Fatalf("%s with the replica paused = %v, want ErrNotSynced", what, err)
		}
		if took < syncTimeout || took > syncTimeout+2*time.Second {
			t.Errorf("%s failed after %v, want about %v", what, took, syncTimeout)
		}
	}
	notSynced("acquire", func() error {
		_, err := ops.Acquire(ctx, name, "a", lease, 0)
		if errors.Is(err, redisops.ErrReplicasChanged) {
			t.Errorf("acquire with the replica paused = %v; a paused replica is still attached, the replicas did not change", err)
		}
		return err
	})
	checkGone(t, client, name)

	notSynced("re-entry", func() error { _, err := ops.Acquire(ctx, name+":held", "a", lease, 1); return err })
	checkHash(t, client, name+":held", map[string]string{"a": "1"})

	notSynced("fair acquire", func() error {
		_, err := ops.FairAcquire(ctx, name+":fair", "a", lease, time.Minute, 0, true)
		return err
	})
	checkGone(t, client, name+":fair")
	checkGone(t, client, redisops.FairQueueKey(name+":fair"))
	checkGone(t, client, redisops.FairTimeoutKey(name+":fair"))

	notSynced("write acquire", func() error { _, err := ops.WriteAcquire(ctx, name+":rw", "w", lease, 0, 0); return err })
	checkGone(t, client, name+":rw")

	notSynced("read acquire", func() error { _, err := ops.ReadAcquire(ctx, name+":rw", "r", lease, 0); return err })
	checkGone(t, client, name+":rw")
	checkGone(t, client, redisops.ReadTimeoutKey(name+":rw", "r", 1))

	b := ops.NewBatch()
	r1 := b.ReadAcquire(redisops.RWNamesOf(name+":batch"), "r1", lease, 0)
	r2 := b.ReadAcquire(redisops.RWNamesOf(name+":batch"), "r2", lease, 0)
	b.Exec(ctx)
	for i, reply := range []func() (redisops.Acquired, error){r1, r2} {
		if _, err := reply(); !errors.Is(err, redisops.ErrNotSynced) {
			t.Errorf("batched read acquire %d = %v, want ErrNotSynced", i+1, err)
		}
	}
	checkGone(t, client, name+":batch")

	rel, err := ops.Release(ctx, name+":held", "a", "paused-1", lease, &redisops.Handoff{Owner: "b", Lease: lease})
	if err != nil || rel.HandedOff || rel.Remaining != 0 || !errors.Is(rel.NotSynced, redisops.ErrNotSynced) {
		t.Fatalf("Release with handoff = %+v, %v; want released, handoff given back with ErrNotSynced", rel, err)
	}
	checkGone(t, client, name+":held")
}

// TestReplicaSyncReplicaGone: when the replica the counts knew of is gone by the time of the WAIT, the
// hold is given back with ErrNotSynced and ErrReplicasChanged (the counts read again are lower), and the
// next acquisition, which asks for what the master has now, is granted.
func TestReplicaSyncReplicaGone(t *testing.T) {
	_, replica, client := startWithReplica(t)
	ops := syncedOps(client)
	ctx := t.Context()
	const name = "replicasync:gone"
	mustAcquire(t, ops, name+":before", "a", lease) // counts the replica
	replica.Kill()

	_, err := ops.Acquire(ctx, name, "a", lease, 0)
	if !errors.Is(err, redisops.ErrNotSynced) || !errors.Is(err, redisops.ErrReplicasChanged) {
		t.Fatalf("acquire after the replica was killed = %v, want ErrNotSynced and ErrReplicasChanged", err)
	}
	checkGone(t, client, name)
	mustAcquire(t, ops, name, "a", lease)
}

// TestReplicaSyncShortWaitOfRefusedCall: a WAIT that falls short beside a script that gave no hold (an
// acquire refused because another owner holds the lock) still makes the next call read the replica
// counts again: with the only replica gone, that call is granted at once, not after a WAIT of its own
// on the old count.
func TestReplicaSyncShortWaitOfRefusedCall(t *testing.T) {
	_, replica, client := startWithReplica(t)
	ops := syncedOps(client)
	ctx := t.Context()
	const name = "replicasync:refused"
	mustAcquire(t, ops, name, "a", lease) // counts the replica
	replica.Kill()
	start := time.Now()
	if got, err := ops.Acquire(ctx, name, "b", lease, 0); err != nil || got.OK {
		t.Fatalf("acquire of a held lock = %+v, %v; want refused", got, err)
	}
	if took := time.Since(start); took < syncTimeout {
		t.Fatalf("the refused acquire took %v: its WAIT did not fall short, the test shows nothing", took)
	}
	start = time.Now()
	mustAcquire(t, ops, name+":2", "b", lease)
	if took := time.Since(start); took >= syncTimeout {
		t.Errorf("the next acquire took %v, want well under the sync timeout %v", took, syncTimeout)
	}
}

// TestReplicaSyncNoReplicas: a master without replicas gets no WAIT, and locks work as without the
// safeguard.
func TestReplicaSyncNoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	ops := syncedOps(client)
	ctx := t.Context()
	const name = "replicasync:alone"
	mustAcquire(t, ops, name, "a", lease)
	if _, err := ops.Release(ctx, name, "a", "alone-1", lease, &redisops.Handoff{Owner: "b", Lease: lease}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got, err := ops.ReadAcquire(ctx, name+":rw", "r", lease, 0); err != nil || !got.OK {
		t.Fatalf("ReadAcquire = %+v, %v", got, err)
	}
	if n := waitCalls(t, client); n != 0 {
		t.Errorf("%d WAITs sent to a master without replicas, want 0", n)
	}
}

// TestReplicaSyncWaitUnsupported: when WAIT answers an error (here it is renamed away), locks are
// granted without it, and it is not sent again.
func TestReplicaSyncWaitUnsupported(t *testing.T) {
	_, _, client := startWithReplica(t, "--rename-command", "WAIT", "")
	ops := syncedOps(client)
	loadScripts(t, client)
	sent := &waitHook{}
	client.AddHook(sent)
	for i, name := range []string{"replicasync:nowait:1", "replicasync:nowait:2"} {
		if got, err := ops.Acquire(t.Context(), name, "a", lease, 0); err != nil || !got.OK {
			t.Fatalf("Acquire %d = %+v, %v; want a hold", i+1, got, err)
		}
	}
	// The first call's WAIT is refused; after it, WAIT is not sent again.
	if n := sent.n.Load(); n != 1 {
		t.Errorf("%d WAITs sent, want 1", n)
	}
}

// TestReplicaSyncReloadsFlushedScripts: a server that lost its scripts still runs the script and its
// WAIT (EVAL after NOSCRIPT).
func TestReplicaSyncReloadsFlushedScripts(t *testing.T) {
	_, _, client := startWithReplica(t)
	ops := syncedOps(client)
	ctx := t.Context()
	const name = "replicasync:noscript"
	mustAcquire(t, ops, name, "a", lease)
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := waitCalls(t, client)
	if got, err := ops.Acquire(ctx, name+":2", "a", lease, 0); err != nil || !got.OK {
		t.Fatalf("Acquire after SCRIPT FLUSH = %+v, %v; want a hold", got, err)
	}
	b := ops.NewBatch()
	r1 := b.ReadAcquire(redisops.RWNamesOf(name+":rw"), "r1", lease, 0)
	r2 := b.ReadAcquire(redisops.RWNamesOf(name+":rw"), "r2", lease, 0)
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	b.Exec(ctx)
	for i, reply := range []func() (redisops.Acquired, error){r1, r2} {
		if got, err := reply(); err != nil || !got.OK {
			t.Errorf("batched read acquire %d after SCRIPT FLUSH = %+v, %v; want a hold", i+1, got, err)
		}
	}
	if n := waitCalls(t, client) - before; n < 2 {
		t.Errorf("%d WAITs, want at least 2 (one per granting round trip)", n)
	}
}

// TestReplicaSyncMiniredis: miniredis reports no replicas (INFO replication is not supported), so the
// safeguard sends no WAIT and changes nothing.
func TestReplicaSyncMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	ops := syncedOps(client)
	ctx := t.Context()
	const name = "replicasync:miniredis"
	mustAcquire(t, ops, name, "a", lease)
	if got, err := ops.Acquire(ctx, name, "a", lease, 1); err != nil || got.HoldCount != 2 {
		t.Fatalf("re-entry = %+v, %v; want hold count 2", got, err)
	}
	if got, err := ops.FairAcquire(ctx, name+":fair", "a", lease, time.Minute, 0, true); err != nil || !got.OK {
		t.Fatalf("FairAcquire = %+v, %v", got, err)
	}
	if got, err := ops.WriteAcquire(ctx, name+":rw", "w", lease, 0, 0); err != nil || !got.OK {
		t.Fatalf("WriteAcquire = %+v, %v", got, err)
	}
	if got, err := ops.ReadAcquire(ctx, name+":rw", "w", lease, 0); err != nil || !got.OK {
		t.Fatalf("ReadAcquire = %+v, %v", got, err)
	}
	if n := mr.CommandCount(); n == 0 {
		t.Fatal("miniredis saw no command")
	}
}

// TestSetReplicaSyncRejectsBadValues: negative replicas other than MajorityOfReplicas, or a timeout that is not positive, is a
// programming error.
func TestSetReplicaSyncRejectsBadValues(t *testing.T) {
	for _, tt := range []struct {
		replicas int
		timeout  time.Duration
	}{{-2, time.Second}, {1, 0}, {1, -time.Second}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetReplicaSync(%d, %v) did not panic", tt.replicas, tt.timeout)
				}
			}()
			redisops.New(nil).SetReplicaSync(tt.replicas, tt.timeout)
		}()
	}
}
