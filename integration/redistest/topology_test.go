package redistest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

func TestReplicaSet(t *testing.T) {
	t.Parallel()
	start := time.Now()
	rs := redistest.StartReplicaSet(t, 2)
	t.Logf("replica set up in %v", time.Since(start))
	if got := rs.Master.Role(t); got != "master" {
		t.Fatalf("master role: got %q, want master", got)
	}
	ctx := t.Context()
	m := rs.Master.Client(t)
	if err := m.Set(ctx, t.Name(), "v", 0).Err(); err != nil {
		t.Fatalf("SET on master: %v", err)
	}
	if n, err := m.Wait(ctx, 2, time.Second).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT 2: got %d, %v; want 2 replicas", n, err)
	}
	for _, r := range rs.Replicas {
		if got := r.Role(t); got != "slave" {
			t.Errorf("replica %s role: got %q, want slave", r.Addr(), got)
		}
		if got, err := r.Client(t).Get(ctx, t.Name()).Result(); err != nil || got != "v" {
			t.Errorf("GET on replica %s: got %q, %v; want v", r.Addr(), got, err)
		}
	}
	if got := len(rs.Servers()); got != 3 {
		t.Errorf("Servers: got %d, want 3", got)
	}
}

func TestStartReplica(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t)
	ctx := t.Context()
	if err := master.Client(t).Set(ctx, t.Name(), "before", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	r := redistest.StartReplica(t, master)
	// In sync means the replica has what the master had.
	if got, err := r.Client(t).Get(ctx, t.Name()).Result(); err != nil || got != "before" {
		t.Fatalf("GET on replica: got %q, %v; want before", got, err)
	}
}

// TestStartReplicaVia: a replica behind its proxy is in sync when started, misses what the master
// writes while the proxy is stalled, and keeps missing it once the master is killed and the proxy
// disabled.
func TestStartReplicaVia(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t)
	ctx := t.Context()
	m := master.Client(t)
	if err := m.Set(ctx, t.Name(), "before", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	r, link := redistest.StartReplicaVia(t, master)
	rc := r.Client(t)
	if got, err := rc.Get(ctx, t.Name()).Result(); err != nil || got != "before" {
		t.Fatalf("GET on replica: got %q, %v; want before", got, err)
	}
	link.Stall()
	if err := m.Set(ctx, t.Name(), "during", 0).Err(); err != nil {
		t.Fatalf("SET during the stall: %v", err)
	}
	if n, err := m.Wait(ctx, 1, 200*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 during the stall: got %d, %v; want 0", n, err)
	}
	master.Kill()
	link.Disable()
	if got, err := rc.Get(ctx, t.Name()).Result(); err != nil || got != "before" {
		t.Fatalf("GET on replica after the master died: got %q, %v; want before", got, err)
	}
}

func TestSentinelsFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	rs := redistest.StartReplicaSet(t, 1)
	s := redistest.StartSentinels(t, rs, 3)
	t.Logf("master, replica and 3 Sentinels up in %v", time.Since(start))
	if got := len(s.Addrs()); got != 3 {
		t.Fatalf("Addrs: got %d, want 3", got)
	}
	if got := s.Quorum(); got != 2 {
		t.Errorf("Quorum: got %d, want 2", got)
	}
	if got := s.Master(t); got != rs.Master {
		t.Fatalf("Master: got %s, want %s", got.Addr(), rs.Master.Addr())
	}
	ctx := t.Context()
	c := s.FailoverClient(t)
	if err := c.Set(ctx, t.Name(), "1", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	if n, err := c.Wait(ctx, 1, time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v", n, err)
	}

	start = time.Now()
	next := s.Failover(t)
	t.Logf("failover in %v", time.Since(start))
	if next != rs.Replicas[0] {
		t.Fatalf("Failover: new master %s, want the replica %s", next.Addr(), rs.Replicas[0].Addr())
	}
	if got := s.MasterAddr(t); got != next.Addr() {
		t.Fatalf("MasterAddr after failover: got %s, want %s", got, next.Addr())
	}
	if got := next.Role(t); got != "master" {
		t.Fatalf("new master's role: got %q", got)
	}
	// The failover client follows: a write succeeds and lands on the new master.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := c.Incr(ctx, t.Name()).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("INCR through the failover client after failover: %v", err)
		}
		<-tick.C
	}
	if got, err := next.Client(t).Get(ctx, t.Name()).Result(); err != nil || got != "2" {
		t.Fatalf("GET on the new master: got %q, %v; want 2", got, err)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	cl := redistest.StartCluster(t, 3)
	t.Logf("cluster %v up in %v", cl, time.Since(start))
	ctx := t.Context()
	cc := cl.Client(t)

	// Find one key per node, write it through the cluster client and read it on its node.
	perNode := make(map[string]string)
	for i := 0; len(perNode) < 3 && i < 1000; i++ {
		key := fmt.Sprintf("%s:%d", t.Name(), i)
		node := cl.NodeForKey(t, key)
		if _, ok := perNode[node.Addr()]; !ok {
			perNode[node.Addr()] = key
		}
	}
	if len(perNode) != 3 {
		t.Fatalf("keys reach %d nodes, want 3", len(perNode))
	}
	for _, node := range cl.Nodes() {
		key := perNode[node.Addr()]
		if err := cc.Set(ctx, key, node.Addr(), 0).Err(); err != nil {
			t.Fatalf("SET %q through the cluster client: %v", key, err)
		}
		if got, err := node.Client(t).Get(ctx, key).Result(); err != nil || got != node.Addr() {
			t.Errorf("GET %q on its node %s: got %q, %v", key, node.Addr(), got, err)
		}
	}
	if got := cl.NodeForSlot(0); got != cl.Nodes()[0] {
		t.Errorf("NodeForSlot(0): got %s, want the first node", got.Addr())
	}
	if got := cl.NodeForSlot(redistest.ClusterSlots - 1); got != cl.Nodes()[2] {
		t.Errorf("NodeForSlot(16383): got %s, want the last node", got.Addr())
	}

	// Sharded pub/sub works on every node.
	for _, node := range cl.Nodes() {
		channel := "{" + perNode[node.Addr()] + "}:ch"
		ps := cc.SSubscribe(ctx, channel)
		if _, err := ps.Receive(ctx); err != nil { // the ssubscribe confirmation
			t.Fatalf("SSUBSCRIBE %s: %v", channel, err)
		}
		if err := cc.SPublish(ctx, channel, "hi").Err(); err != nil {
			t.Fatalf("SPUBLISH %s: %v", channel, err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := ps.Receive(rctx)
		cancel()
		if m, ok := msg.(*redis.Message); err != nil || !ok || m.Payload != "hi" {
			t.Errorf("sharded message on %s: got %v, %v", channel, msg, err)
		}
		_ = ps.Close()
	}
}
