package redisops

import (
	"context"
	"testing"
	"time"
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
// for the reading in progress only if it started after that moment, and otherwise for a new one; a
// caller whose counts are only old does not wait for a reading in progress.
func TestReplicaSyncWantAfterWaitsForALaterReading(t *testing.T) {
	rs := &replicaSync{replicas: MajorityOfReplicas, counts: map[string]int{"": 2}, checked: time.Now().Add(-2 * time.Second)}
	old := &countReading{started: time.Now().Add(-time.Second), done: make(chan struct{})}
	rs.reading = old
	after := time.Now()
	got := make(chan int, 1)
	go func() { got <- rs.wantAfter(context.Background(), nil, "", after) }()
	// Finishing the older reading does not answer the caller: it starts its own (a nil client is
	// neither a *redis.Client nor a *redis.ClusterClient: it has no replicas).
	rs.mu.Lock()
	rs.reading = nil
	close(old.done)
	rs.mu.Unlock()
	select {
	case n := <-got:
		if n != 0 {
			t.Errorf("got %d, want 0, from a reading of its own", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wantAfter did not return")
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.checked.After(after) {
		t.Errorf("the counts were read at %v, not after %v", rs.checked, after)
	}
}
