package actors

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// Bridge owns the pub/sub connections of a coordinator. A channel stays subscribed while at least
// one lock actor asks for it. Every message is forwarded to the actors of its channel as a [messages.Notice].
// Every subscription confirmation, including the ones go-redis receives when it resubscribes after a
// reconnect, is forwarded as [messages.Subscribed], so the lock actors retry: notices published while the
// connection was down are lost.
//
// On a single server or through Sentinel, one connection carries every channel (SUBSCRIBE). On Redis
// Cluster ([redisops.DeploymentCluster]) the channels are shard channels (SSUBSCRIBE), and the bridge keeps
// one connection per hash slot with subscribed channels, to the master of that slot: a node accepts
// SSUBSCRIBE only for the slots it serves, one SSUBSCRIBE may name the channels of one slot only, and
// go-redis resubscribes all the channels of a connection in one command after a reconnect. A connection
// is closed when the last channel of its slot goes. When Redis drops a shard channel on its own (its slot
// moved to another node), the bridge connects that slot again, which goes to the slot's new master.
//
// On Sentinel's failover client, go-redis moves commands to the new master after a failover but leaves
// an open pub/sub connection on the old one, which then misses every notice. So while channels are
// subscribed, the bridge publishes a probe through the client every [probeInterval] on a channel of its
// own; when two probes in a row do not come back, it opens a new connection (to the current master)
// and subscribes everything again, and the confirmations make the lock actors retry.
//
// The actor keeps the subscriptions; the goroutine that reads a connection fans each message out
// itself, from a snapshot of the subscriber table that the actor publishes after every change, so that
// a notice reaches a lock actor without waiting for the bridge's mailbox. Both paths deliver in the
// order Redis sent, since one goroutine reads and forwards all the messages of a channel.
type Bridge struct {
	client redis.UniversalClient
	ctx    context.Context
	logger *slog.Logger
	// stop bounds how long stopping waits for the connections to close.
	stop    *StopClock
	sharded bool
	self    *actor.PID
	root    *actor.RootContext

	// pubsub is the one connection of an unsharded bridge.
	pubsub *redis.PubSub
	// shards are the connections of a sharded bridge, by hash slot.
	shards map[int]*shard
	// unsubscribing counts the SUNSUBSCRIBE confirmations still due per channel, so that a
	// confirmation of the bridge's own unsubscribe is not taken for a channel that Redis dropped.
	unsubscribing map[string]int
	// readers tracks the goroutines that read the connections.
	readers sync.WaitGroup

	// probe is the bridge's own channel on a failover client, "" otherwise; probing tells whether
	// probes are published; probeTimer ticks them; probeSent, probeSeen and probeMissed track the last
	// probe and the probes in a row that did not come back.
	probe       string
	probing     bool
	probeTimer  oneShot
	sched       *scheduler.TimerScheduler
	probeSent   bool
	probeSeen   bool
	probeMissed int

	subs map[string]map[string]*actor.PID
	// routes maps each channel to a snapshot of its subscribers ([]*actor.PID, replaced and never
	// changed), which the reading goroutines fan out to.
	routes sync.Map
}

// shard is the connection of one hash slot and the channels subscribed on it.
type shard struct {
	pubsub   *redis.PubSub
	channels map[string]struct{}
}

// shardDropped tells the bridge that Redis ended the subscription of a shard channel (SUNSUBSCRIBE
// confirmation or push) on the connection pubsub.
type shardDropped struct {
	channel string
	pubsub  *redis.PubSub
}

// probeTick and probeBack are the bridge's messages to itself: time to publish a probe, and a probe
// came back.
type (
	probeTick struct{ gen uint64 }
	probeBack struct{}
)

// probeInterval is how often a bridge on a failover client publishes a probe while channels are
// subscribed; a pub/sub connection left on an old master is replaced within about 3 intervals.
const probeInterval = time.Second

// NewBridgeProps returns the props of a bridge over client, a client of the deployment d (see
// [redisops.DeploymentOf]). Subscribe calls are bounded by ctx. The bridge uses sharded pub/sub when d
// is sharded, in step with the scripts of a [redisops.Ops] made for the same deployment, and probes its
// connection on a failover deployment. Stopping waits for the connections to close until the deadline
// of stop. A panic is recovered and reported to failures, and the bridge then subscribes every channel
// it serves again.
func NewBridgeProps(client redis.UniversalClient, d redisops.Deployment, ctx context.Context, logger *slog.Logger,
	stop *StopClock, failures *Failures) *actor.Props {
	probe := ""
	if d == redisops.DeploymentFailover {
		probe = "lockwarden:bridge:" + uuid.NewString()
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Bridge{
			probe:         probe,
			client:        client,
			ctx:           ctx,
			logger:        logger,
			stop:          stop,
			sharded:       d.Sharded(),
			shards:        make(map[int]*shard),
			unsubscribing: make(map[string]int),
			subs:          make(map[string]map[string]*actor.PID),
		}
	}, Recover(failures, "pub/sub bridge", ""))
}

// Receive implements actor.Actor.
func (b *Bridge) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		b.self = ctx.Self()
		b.root = ctx.ActorSystem().Root
		b.sched = scheduler.NewTimerScheduler(b.root)
		if !b.sharded {
			b.pubsub = b.client.Subscribe(b.ctx)
			b.read(b.pubsub)
		}
	case *messages.Subscribe:
		pids := b.subs[m.Channel]
		first := pids == nil
		if first {
			pids = make(map[string]*actor.PID)
			b.subs[m.Channel] = pids
		}
		pids[m.Subscriber.String()] = m.Subscriber
		// The route goes first, so that the confirmation finds the subscriber.
		b.publishRoute(m.Channel)
		if first {
			b.subscribe(m.Channel)
		} else {
			// Another actor subscribed the channel before (a semaphore and a permit semaphore of
			// one name share theirs): its confirmation may have come already, and would not come
			// again. Confirm now; should the subscription still be on its way, its confirmation
			// reaches this subscriber too (the route has it), and a second try is harmless.
			ctx.Send(m.Subscriber, &messages.Subscribed{Channel: m.Channel})
		}
		if b.probe != "" && !b.probeTimer.armed() {
			b.probeTimer.arm(b.sched, b.self, probeInterval, func(g uint64) any { return &probeTick{g} })
		}
	case *messages.Unsubscribe:
		pids := b.subs[m.Channel]
		delete(pids, m.Subscriber.String())
		last := pids != nil && len(pids) == 0
		if last {
			delete(b.subs, m.Channel)
		}
		b.publishRoute(m.Channel)
		// While the coordinator closes (its context is done) the connections are about to close:
		// an UNSUBSCRIBE would only wait for go-redis' PubSub lock, which a reconnect in a
		// partition holds until the client's ReadTimeout.
		if last && b.ctx.Err() == nil {
			b.unsubscribe(m.Channel)
		}
	case *shardDropped:
		b.dropped(m)
	case *probeBack:
		b.probeSeen = true
	case *probeTick:
		if b.probeTimer.current(m.gen) {
			b.tick(ctx)
		}
	case *actor.Stopping:
		b.probeTimer.stop()
		b.closeConnections()
	}
}

// closeConnections closes the pub/sub connections and waits for their readers, until the stop
// deadline. go-redis holds a PubSub's lock while it opens a new connection, and that can block until the
// client's ReadTimeout when the network is partitioned (its reader reconnects with no deadline): Close
// then waits for the lock. Past the stop deadline the connections finish closing in the background, so
// that the coordinator's Close stays bounded.
func (b *Bridge) closeConnections() {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		if b.pubsub != nil {
			_ = b.pubsub.Close()
		}
		for _, sh := range b.shards {
			_ = sh.pubsub.Close()
		}
		b.readers.Wait()
	}()
	timer := time.NewTimer(time.Until(b.stop.Deadline()))
	defer timer.Stop()
	select {
	case <-closed:
	case <-timer.C:
		b.logger.Warn("pub/sub connections still closing at the stop deadline; they finish in the background")
	}
}

// subscribe subscribes channel on its connection, opening the connection of its slot if needed.
func (b *Bridge) subscribe(channel string) {
	// go-redis records the channel even when the write fails, and subscribes it again on the next
	// connection; the confirmation then reaches the subscriber.
	if !b.sharded {
		if b.probe != "" && !b.probing {
			b.probing = true
			if err := b.pubsub.Subscribe(b.ctx, b.probe); err != nil {
				b.logger.Warn("subscribe failed; it will be retried on reconnect", "channel", b.probe, "err", err)
			}
		}
		if err := b.pubsub.Subscribe(b.ctx, channel); err != nil {
			b.logger.Warn("subscribe failed; it will be retried on reconnect", "channel", channel, "err", err)
		}
		return
	}
	slot := redisops.Slot(channel)
	sh := b.shards[slot]
	if sh == nil {
		sh = &shard{pubsub: b.client.SSubscribe(b.ctx), channels: make(map[string]struct{})}
		b.shards[slot] = sh
		// The first SSUBSCRIBE goes before the reader starts: the connection goes to the node of
		// the first channel go-redis knows, and the reader would otherwise connect to a random node.
		defer b.read(sh.pubsub)
	}
	sh.channels[channel] = struct{}{}
	if err := sh.pubsub.SSubscribe(b.ctx, channel); err != nil {
		b.logger.Warn("ssubscribe failed; it will be retried on reconnect", "channel", channel, "err", err)
	}
}

// unsubscribe unsubscribes channel, closing the connection of its slot when it was the last channel.
func (b *Bridge) unsubscribe(channel string) {
	if !b.sharded {
		if err := b.pubsub.Unsubscribe(b.ctx, channel); err != nil {
			b.logger.Warn("unsubscribe failed", "channel", channel, "err", err)
		}
		return
	}
	slot := redisops.Slot(channel)
	sh := b.shards[slot]
	if sh == nil {
		return
	}
	delete(sh.channels, channel)
	if len(sh.channels) == 0 {
		delete(b.shards, slot)
		_ = sh.pubsub.Close()
		return
	}
	if err := sh.pubsub.SUnsubscribe(b.ctx, channel); err != nil {
		b.logger.Warn("sunsubscribe failed", "channel", channel, "err", err)
		return
	}
	b.unsubscribing[channel]++
}

// dropped handles the end of a shard channel's subscription. The bridge's own unsubscribes are
// expected; any other end means the channel's slot left the node (resharding, failover), so the
// connection of that slot is opened again, to the slot's current master, and subscribes every channel
// of the slot again. Its confirmations make the lock actors retry.
func (b *Bridge) dropped(m *shardDropped) {
	if n := b.unsubscribing[m.channel]; n > 0 {
		if n == 1 {
			delete(b.unsubscribing, m.channel)
		} else {
			b.unsubscribing[m.channel] = n - 1
		}
		return
	}
	slot := redisops.Slot(m.channel)
	sh := b.shards[slot]
	if sh == nil || sh.pubsub != m.pubsub {
		return // that connection is gone already
	}
	if _, ok := sh.channels[m.channel]; !ok {
		return
	}
	b.logger.Warn("Redis dropped a shard channel; connecting its slot again", "channel", m.channel, "slot", slot)
	_ = sh.pubsub.Close()
	channels := make([]string, 0, len(sh.channels))
	for ch := range sh.channels {
		channels = append(channels, ch)
	}
	sh.pubsub = b.client.SSubscribe(b.ctx)
	if err := sh.pubsub.SSubscribe(b.ctx, channels...); err != nil {
		b.logger.Warn("ssubscribe failed; it will be retried on reconnect", "slot", slot, "err", err)
	}
	b.read(sh.pubsub)
}

// tick publishes the next probe, and replaces the pub/sub connection when probes stopped coming back:
// it is then on a server that no longer gets the master's notices. It runs while channels are
// subscribed.
func (b *Bridge) tick(ctx actor.Context) {
	if len(b.subs) == 0 {
		b.probeSent, b.probeSeen, b.probeMissed = false, false, 0
		return
	}
	if b.probeSent && !b.probeSeen {
		b.probeMissed++
	} else {
		b.probeMissed = 0
	}
	if b.probeMissed >= 2 {
		b.logger.Warn("pub/sub probes do not come back (failover?); subscribing again on a new connection")
		b.probeMissed = 0
		b.resubscribeAll()
	}
	b.probeSent, b.probeSeen = true, false
	b.readers.Add(1)
	go func() {
		defer b.readers.Done()
		pctx, cancel := context.WithTimeout(b.ctx, probeInterval)
		defer cancel()
		_ = b.client.Publish(pctx, b.probe, "probe").Err()
	}()
	b.probeTimer.arm(b.sched, b.self, probeInterval, func(g uint64) any { return &probeTick{g} })
}

// resubscribeAll subscribes every channel the bridge serves again, on new connections, and closes the
// old ones. Every channel's confirmation reaches its lock actors, which retry.
func (b *Bridge) resubscribeAll() {
	if !b.sharded {
		old := b.pubsub
		b.pubsub = b.client.Subscribe(b.ctx)
		var channels []string
		if b.probe != "" && b.probing {
			channels = append(channels, b.probe)
		}
		for ch := range b.subs {
			channels = append(channels, ch)
		}
		if len(channels) > 0 {
			if err := b.pubsub.Subscribe(b.ctx, channels...); err != nil {
				b.logger.Warn("subscribe failed; it will be retried on reconnect", "err", err)
			}
		}
		b.read(b.pubsub)
		if old != nil {
			_ = old.Close()
		}
		return
	}
	for slot, sh := range b.shards {
		_ = sh.pubsub.Close()
		delete(b.shards, slot)
	}
	clear(b.unsubscribing)
	for ch := range b.subs {
		b.subscribe(ch)
	}
}

// publishRoute makes the current subscribers of channel the ones the reading goroutines send to.
func (b *Bridge) publishRoute(channel string) {
	pids := b.subs[channel]
	if len(pids) == 0 {
		b.routes.Delete(channel)
		return
	}
	route := make([]*actor.PID, 0, len(pids))
	for _, pid := range pids {
		route = append(route, pid)
	}
	b.routes.Store(channel, route)
}

// route returns the subscribers of channel.
func (b *Bridge) route(channel string) []*actor.PID {
	r, _ := b.routes.Load(channel)
	pids, _ := r.([]*actor.PID)
	return pids
}

// read starts the goroutine that reads pubsub until it is closed and fans its messages out.
func (b *Bridge) read(pubsub *redis.PubSub) {
	in := pubsub.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	b.readers.Add(1)
	go func() {
		defer b.readers.Done()
		for m := range in {
			switch m := m.(type) {
			case *redis.Subscription:
				switch m.Kind {
				case "subscribe", "ssubscribe":
					for _, pid := range b.route(m.Channel) {
						b.root.Send(pid, &messages.Subscribed{Channel: m.Channel})
					}
				case "sunsubscribe":
					b.root.Send(b.self, &shardDropped{channel: m.Channel, pubsub: pubsub})
				}
			case *redis.Message:
				if b.probe != "" && m.Channel == b.probe {
					b.root.Send(b.self, &probeBack{})
					continue
				}
				for _, pid := range b.route(m.Channel) {
					b.root.Send(pid, &messages.Notice{Channel: m.Channel, Payload: m.Payload})
				}
			}
		}
	}()
}
