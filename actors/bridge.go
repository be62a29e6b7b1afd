package actors

import (
	"context"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/messages"
)

// Bridge owns the one pub/sub connection of a coordinator. A channel stays subscribed while at least
// one lock actor asks for it. Every message is forwarded to the actors of its channel as a [messages.Notice].
// Every subscription confirmation, including the ones go-redis receives when it resubscribes after a
// reconnect, is forwarded as [messages.Subscribed], so the lock actors retry: notices published while the
// connection was down are lost.
//
// The actor keeps the subscriptions; the goroutine that reads the connection fans each message out
// itself, from a snapshot of the subscriber table that the actor publishes after every change, so that
// a notice reaches a lock actor without waiting for the bridge's mailbox. Both paths deliver in the
// order Redis sent, since one goroutine reads and forwards them all.
type Bridge struct {
	client redis.UniversalClient
	ctx    context.Context
	logger *slog.Logger

	pubsub *redis.PubSub
	done   chan struct{}
	subs   map[string]map[string]*actor.PID
	// routes maps each channel to a snapshot of its subscribers ([]*actor.PID, replaced and never
	// changed), which the reading goroutine fans out to.
	routes sync.Map
}

// NewBridgeProps returns the props of a bridge over client. Subscribe calls are bounded by ctx.
func NewBridgeProps(client redis.UniversalClient, ctx context.Context, logger *slog.Logger) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &Bridge{client: client, ctx: ctx, logger: logger, subs: make(map[string]map[string]*actor.PID)}
	})
}

// Receive implements actor.Actor.
func (b *Bridge) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		b.start(ctx)
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
			// go-redis records the channel even when the write fails, and subscribes it again on
			// the next connection; the confirmation then reaches the subscriber.
			if err := b.pubsub.Subscribe(b.ctx, m.Channel); err != nil {
				b.logger.Warn("subscribe failed; it will be retried on reconnect", "channel", m.Channel, "err", err)
			}
		}
	case *messages.Unsubscribe:
		pids := b.subs[m.Channel]
		delete(pids, m.Subscriber.String())
		last := pids != nil && len(pids) == 0
		if last {
			delete(b.subs, m.Channel)
		}
		b.publishRoute(m.Channel)
		if last {
			if err := b.pubsub.Unsubscribe(b.ctx, m.Channel); err != nil {
				b.logger.Warn("unsubscribe failed", "channel", m.Channel, "err", err)
			}
		}
	case *actor.Stopping:
		_ = b.pubsub.Close()
		<-b.done
	}
}

// publishRoute makes the current subscribers of channel the ones the reading goroutine sends to.
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

func (b *Bridge) start(ctx actor.Context) {
	b.pubsub = b.client.Subscribe(b.ctx)
	b.done = make(chan struct{})
	in := b.pubsub.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	root := ctx.ActorSystem().Root
	go func() {
		defer close(b.done)
		for m := range in {
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind != "subscribe" && m.Kind != "ssubscribe" {
					continue
				}
				for _, pid := range b.route(m.Channel) {
					root.Send(pid, &messages.Subscribed{Channel: m.Channel})
				}
			case *redis.Message:
				for _, pid := range b.route(m.Channel) {
					root.Send(pid, &messages.Notice{Channel: m.Channel, Payload: m.Payload})
				}
			}
		}
	}()
}
