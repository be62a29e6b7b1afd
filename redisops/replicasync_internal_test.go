package redisops

import (
	"context"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestReplicaSyncOf(t *testing.T) {
	tests := []struct {
		replicas, attached, want int
	}{
		{MajorityOfReplicas, 0, 0},
		{MajorityOfReplicas, 1, 1},
		{MajorityOfReplicas, 2, 2},
		{MajorityOfReplicas, 3, 2},
		{MajorityOfReplicas, 4, 3},
		{MajorityOfReplicas, 5, 3},
		{1, 0, 0},
		{1, 2, 1},
		{3, 2, 2},
		{3, 5, 3},
	}
	for _, tt := range tests {
		rs := &replicaSync{replicas: tt.replicas}
		if got := rs.of(tt.attached); got != tt.want {
			t.Errorf("replicas %d, %d attached: got %d, want %d", tt.replicas, tt.attached, got, tt.want)
		}
	}
}

func TestParseReplication(t *testing.T) {
	tests := []struct {
		name, info string
		want       int
		wantReplID string
	}{
		{"fresh master, replica at offset 0", "role:master\r\nconnected_slaves:1\r\n" +
			"slave0:ip=127.0.0.1,port=6380,state=online,offset=0,lag=0\r\nmaster_replid:abc\r\n", 1, "abc"},
		{"one online, one syncing", "connected_slaves:2\r\n" +
			"slave0:ip=127.0.0.1,port=6380,state=online,offset=120,lag=0\r\n" +
			"slave1:ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=0\r\nmaster_replid:def\r\n", 1, "def"},
		{"no replica", "role:master\r\nconnected_slaves:0\r\nmaster_replid:x\r\n", 0, "x"},
		{"no state reported", "connected_slaves:2\r\n", 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, id := parseReplication(tt.info)
			if n != tt.want || id != tt.wantReplID {
				t.Errorf("got %d, %q; want %d, %q", n, id, tt.want, tt.wantReplID)
			}
		})
	}
}

// TestReplicaSyncWantAfterWaitsForALaterReading: a caller that needs counts read after a moment waits
// for the reading in progress, and when that one started before the moment, for a new one after it;
// a caller whose counts are only old does not wait for a reading in progress. The bubble's clock and
// synctest.Wait make each step certain: the caller is blocked on the reading before it finishes.
func TestReplicaSyncWantAfterWaitsForALaterReading(t *testing.T) {
	t.Run("reading started before the moment", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rs := &replicaSync{replicas: MajorityOfReplicas, counts: map[string]int{"": 2}, checked: time.Now().Add(-2 * time.Second)}
			old := &countReading{started: time.Now().Add(-time.Second), done: make(chan struct{})}
			rs.reading = old
			after := time.Now()
			got := make(chan int, 1)
			go func() { got <- rs.wantAfter(context.Background(), nil, "", after) }()
			synctest.Wait() // the caller waits for the reading in progress
			select {
			case n := <-got:
				t.Fatalf("wantAfter answered %d while the reading it waits for was in progress", n)
			default:
			}
			time.Sleep(time.Millisecond)
			// Finishing the older reading does not answer the caller: it starts its own (a nil client
			// is neither a *redis.Client nor a *redis.ClusterClient: it has no replicas).
			rs.mu.Lock()
			rs.reading = nil
			close(old.done)
			rs.mu.Unlock()
			if n := <-got; n != 0 {
				t.Errorf("got %d, want 0, from a reading of its own", n)
			}
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if !rs.checked.After(after) {
				t.Errorf("the counts were read at %v, not after %v", rs.checked, after)
			}
		})
	})
	t.Run("counts only old", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			checked := time.Now().Add(-ReplicaRefreshInterval - time.Second)
			rs := &replicaSync{replicas: MajorityOfReplicas, counts: map[string]int{"": 2}, checked: checked}
			old := &countReading{started: time.Now().Add(-time.Second), done: make(chan struct{})}
			rs.reading = old
			got := make(chan int, 1)
			go func() { got <- rs.want(context.Background(), nil, "") }()
			synctest.Wait()
			select {
			case n := <-got:
				if n != 2 {
					t.Errorf("got %d, want 2 from the old counts", n)
				}
			default:
				t.Error("want waited for the reading in progress, with counts that are only old")
			}
			rs.mu.Lock()
			rs.reading = nil
			close(old.done)
			rs.mu.Unlock()
			synctest.Wait()
			if !rs.checked.Equal(checked) {
				t.Errorf("the counts were read again at %v", rs.checked)
			}
		})
	})
}

// replyError is an error reply of a server, as go-redis gives it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// TestScriptRan: only an answer the script itself gave marks the script as loaded on a master; a
// refusal before it ran (a redirection, a replica, a loading or busy server, missing permissions)
// does not, or the next call would send EVALSHA, meet NOSCRIPT and wait twice.
func TestScriptRan(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, true},
		{replyError("WRONGTYPE {l} holds a string, not a hash"), true},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value script: 3c5e, on @user_script:12."), true},
		{replyError("WRONGKIND {l} holds another kind of lock"), true},
		{replyError("ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 3c5e, on @user_script:1."), true},
		{replyError("ERR Error running script (call to f_3c5e): @user_script:1: oops"), true},
		{replyError("MOVED 3999 127.0.0.1:6381"), false},
		{replyError("ASK 3999 127.0.0.1:6381"), false},
		{replyError("READONLY You can't write against a read only replica. script: 3c5e, on @user_script:3."), false},
		{replyError("LOADING Redis is loading the dataset in memory"), false},
		{replyError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."), false},
		{replyError("NOPERM User default has no permissions to run the 'evalsha' command"), false},
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), false},
		{replyError("ERR wrong number of arguments for 'evalsha' command"), false},
		{replyError("NOSCRIPT No matching script. Please use EVAL."), false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := scriptRan(tt.err); got != tt.want {
			t.Errorf("scriptRan(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestCheckSyncedCallerGone: a call that failed because its caller's context ended says nothing of the
// server: the scripts the masters are known to have are kept, and the replica counts are not read
// again.
func TestCheckSyncedCallerGone(t *testing.T) {
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
		o := &Ops{}
		o.SetReplicaSync(1, time.Second)
		rs := o.sync
		rs.setLoaded("", renewScript.Hash())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		reply, wait := redis.NewCmd(ctx), redis.NewCmd(ctx)
		reply.SetErr(cause)
		wait.SetErr(cause)
		c := call{script: acquireScript, keys: []string{"l"}}
		if err := o.checkSynced(ctx, c, reply, wait, "", 1, time.Second); err != nil {
			t.Errorf("%v: checkSynced = %v, want nil", cause, err)
		}
		if !rs.isLoaded("", renewScript.Hash()) {
			t.Errorf("%v: the masters' scripts were forgotten", cause)
		}
		if !rs.invalidated.IsZero() {
			t.Errorf("%v: the replica counts were marked stale", cause)
		}
	}
}

// TestCheckCallerGoneOnlyByTheError: a connection error says the server may have changed, whether or
// not the caller's context has ended meanwhile: checkSynced and checkRenewed forget the scripts the
// master is known to have and mark the replica counts stale. A context error excuses the call, in
// checkRenewed as in checkSynced.
func TestCheckCallerGoneOnlyByTheError(t *testing.T) {
	connErr := &net.OpError{Op: "read", Net: "tcp", Err: io.ErrUnexpectedEOF}
	for _, tc := range []struct {
		name      string
		err       error
		ctxEnded  bool
		forgotten bool
	}{
		{"connection error, live context", connErr, false, true},
		{"connection error, ended context", connErr, true, true},
		{"canceled", context.Canceled, true, false},
		{"deadline", context.DeadlineExceeded, true, false},
	} {
		for _, check := range []string{"checkSynced", "checkRenewed"} {
			o := &Ops{}
			o.SetReplicaSync(1, time.Second)
			rs := o.sync
			rs.setLoaded("", renewScript.Hash())
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctxEnded {
				cancel()
			}
			reply, wait := redis.NewCmd(ctx), redis.NewCmd(ctx)
			reply.SetErr(tc.err)
			wait.SetErr(tc.err)
			var err error
			if check == "checkSynced" {
				err = o.checkSynced(ctx, call{script: acquireScript, keys: []string{"l"}}, reply, wait, "", 1, time.Second)
			} else {
				err = o.checkRenewed(ctx, reply, wait, "", 1, time.Second, map[*redis.Cmd]bool{})
			}
			cancel()
			if err != nil {
				t.Errorf("%s, %s = %v, want nil", tc.name, check, err)
			}
			if got := !rs.isLoaded("", renewScript.Hash()); got != tc.forgotten {
				t.Errorf("%s, %s: scripts forgotten = %v, want %v", tc.name, check, got, tc.forgotten)
			}
			if got := !rs.invalidated.IsZero(); got != tc.forgotten {
				t.Errorf("%s, %s: counts marked stale = %v, want %v", tc.name, check, got, tc.forgotten)
			}
		}
	}
}
