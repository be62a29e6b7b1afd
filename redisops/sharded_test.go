package redisops_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/redisops"
)

func TestShardedPubSubDetection(t *testing.T) {
	t.Parallel()
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	universal := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() {
		for _, c := range []redis.UniversalClient{single, cluster, universal, failover} {
			_ = c.Close()
		}
	})
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		want   bool
	}{
		{"single", single, false},
		{"cluster", cluster, true},
		{"universal with several addresses", universal, true},
		{"failover", failover, false},
	} {
		if got := redisops.ShardedPubSub(tc.client); got != tc.want {
			t.Errorf("ShardedPubSub(%s): got %v, want %v", tc.name, got, tc.want)
		}
		if got := redisops.New(tc.client).ShardedPubSub(); got != tc.want {
			t.Errorf("New(%s).ShardedPubSub(): got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSlotMatchesRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes"))
	c := srv.Client(t)
	keys := []string{"", "a", "orders:42", "{user:1}:lock", "a{b}c", "a{}b", "a{", "}a{b", "{a}{b}",
		"redisson_lock__channel:{x}", "redisson_lock__channel:{x}:owner-1", "\xff\x00binary"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("key:%d", i))
	}
	for _, k := range keys {
		want, err := c.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := redisops.Slot(k); got != int(want) {
			t.Errorf("Slot(%q): got %d, want %d", k, got, want)
		}
	}
}

// shardSubscribe subscribes channel with SSUBSCRIBE on cc, waits for the confirmation, and closes the
// subscription at cleanup.
func shardSubscribe(t *testing.T, cc *redis.ClusterClient, channel string) *redis.PubSub {
	t.Helper()
	ps := cc.SSubscribe(t.Context(), channel)
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(t.Context()); err != nil {
		t.Fatalf("SSUBSCRIBE %s: %v", channel, err)
	}
	return ps
}

// expectShardMessage fails unless the next message on ps, within msgTimeout, is payload on channel.
func expectShardMessage(t *testing.T, ps *redis.PubSub, channel, payload string) {
	t.Helper()
	rctx, cancel := context.WithTimeout(t.Context(), msgTimeout)
	defer cancel()
	m, err := ps.ReceiveMessage(rctx)
	if err != nil {
		t.Fatalf("waiting for %q on %s: %v", payload, channel, err)
	}
	if m.Channel != channel || m.Payload != payload {
		t.Fatalf("message: got %q on %s, want %q on %s", m.Payload, m.Channel, payload, channel)
	}
}

// TestShardedNotices runs the scripts that publish through an Ops on a ClusterClient: the notices
// arrive on the shard channels, and the handoff rule counts shard subscribers.
func TestShardedNotices(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	o := redisops.New(cc)
	ctx := t.Context()
	name := t.Name()

	sub := func(channel string) *redis.PubSub { return shardSubscribe(t, cc, channel) }
	expect := func(ps *redis.PubSub, channel, payload string) { expectShardMessage(t, ps, channel, payload) }

	// Plain lock: release and force unlock publish on the shard channel.
	ps := sub(redisops.ChannelName(name))
	if a, err := o.Acquire(ctx, name, "o1", lease, 0); err != nil || !a.OK {
		t.Fatalf("Acquire: %+v, %v", a, err)
	}
	if r, err := o.Release(ctx, name, "o1", "r1", lease, nil); err != nil || r.Remaining != 0 {
		t.Fatalf("Release: %+v, %v", r, err)
	}
	expect(ps, redisops.ChannelName(name), redisops.UnlockMessage)
	if _, err := o.Acquire(ctx, name, "o1", lease, 0); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if ok, err := o.ForceUnlock(ctx, name); err != nil || !ok {
		t.Fatalf("ForceUnlock: %v, %v", ok, err)
	}
	expect(ps, redisops.ChannelName(name), redisops.UnlockMessage)

	// The handoff rule: with a second shard subscriber on the channel, a release whose handoff
	// budget is spent publishes instead of handing off; with one, it hands off.
	if _, err := o.Acquire(ctx, name, "o1", lease, 0); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	other := sub(redisops.ChannelName(name))
	r, err := o.Release(ctx, name, "o1", "r2", lease, &redisops.Handoff{Owner: "o2", Lease: lease, OnlyIfAlone: true})
	if err != nil || r.HandedOff {
		t.Fatalf("Release with two shard subscribers: %+v, %v; want no handoff", r, err)
	}
	expect(other, redisops.ChannelName(name), redisops.UnlockMessage)
	_ = other.Close()
	// The server counts the subscriber as gone once it has processed the closed connection.
	deadline := time.Now().Add(msgTimeout)
	for {
		n, err := cc.PubSubShardNumSub(ctx, redisops.ChannelName(name)).Result()
		if err != nil {
			t.Fatalf("PUBSUB SHARDNUMSUB: %v", err)
		}
		if n[redisops.ChannelName(name)] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUBSUB SHARDNUMSUB: got %v, want 1 subscriber", n)
		}
		<-time.After(10 * time.Millisecond)
	}
	if _, err := o.Acquire(ctx, name, "o1", lease, 0); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	r, err = o.Release(ctx, name, "o1", "r3", lease, &redisops.Handoff{Owner: "o2", Lease: lease, OnlyIfAlone: true})
	if err != nil || !r.HandedOff {
		t.Fatalf("Release with one shard subscriber: %+v, %v; want a handoff", r, err)
	}

	// Fair lock: the head waiter is told on its own shard channel.
	fair := name + ":fair"
	head := sub(redisops.FairChannelName(fair, "w1"))
	if a, err := o.FairAcquire(ctx, fair, "h", lease, time.Minute, 0, true); err != nil || !a.OK {
		t.Fatalf("FairAcquire h: %+v, %v", a, err)
	}
	if a, err := o.FairAcquire(ctx, fair, "w1", lease, time.Minute, 0, true); err != nil || a.OK {
		t.Fatalf("FairAcquire w1: %+v, %v; want queued", a, err)
	}
	if r, err := o.FairRelease(ctx, fair, "h", "r4", lease, nil); err != nil || r.Next != "w1" {
		t.Fatalf("FairRelease: %+v, %v; want next w1", r, err)
	}
	expect(head, redisops.FairChannelName(fair, "w1"), redisops.UnlockMessage)

	// Read-write lock: read and write releases publish on the rwlock shard channel.
	rw := name + ":rw"
	rwps := sub(redisops.RWChannelName(rw))
	if a, err := o.ReadAcquire(ctx, rw, "r", lease, 0); err != nil || !a.OK {
		t.Fatalf("ReadAcquire: %+v, %v", a, err)
	}
	if _, err := o.ReadRelease(ctx, rw, "r", "r5", lease); err != nil {
		t.Fatalf("ReadRelease: %v", err)
	}
	expect(rwps, redisops.RWChannelName(rw), redisops.UnlockMessage)
	if a, err := o.WriteAcquire(ctx, rw, "w", lease, 0, 0); err != nil || !a.OK {
		t.Fatalf("WriteAcquire: %+v, %v", a, err)
	}
	if _, err := o.WriteRelease(ctx, rw, "w", "r6", lease); err != nil {
		t.Fatalf("WriteRelease: %v", err)
	}
	expect(rwps, redisops.RWChannelName(rw), redisops.ReadUnlockMessage)
}
