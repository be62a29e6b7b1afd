package actors

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/messages"
)

// Bridge owns the one pub/sub connection of a coordinator. A channel stays subscribed while at least
// one lock actor asks for it. Every message is forwarded to the actors of its channel as a [messages.Notice].
// Every subscription confirmation, including the ones go-redis receives when it resubscribes after a
// reconnect, is forwarded as [messages.Subscribed], so the lock actors retry: notices published while the
// connection was down are lost.
type Bridge struct {
	client redis.UniversalClient
	ctx    context.Context
	logger *slog.Logger

	pubsub *redis.PubSub
	done   chan struct{}
	subs   map[string]map[string]*actor.PID
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
		if pids == nil {
			pids = make(map[string]*actor.PID)
			b.subs[m.Channel] = pids
			// go-redis records the channel even when the write fails, and subscribes it again on
			// the next connection; the confirmation then reaches the subscriber.
			if err := b.pubsub.Subscribe(b.ctx, m.Channel); err != nil {
				b.logger.Warn("subscribe failed; it will be retried on reconnect", "channel", m.Channel, "err", err)
			}
		}
		pids[m.Subscriber.String()] = m.Subscriber
	case *messages.Unsubscribe:
		pids := b.subs[m.Channel]
		delete(pids, m.Subscriber.String())
		if pids != nil && len(pids) == 0 {
			delete(b.subs, m.Channel)
			if err := b.pubsub.Unsubscribe(b.ctx, m.Channel); err != nil {
				b.logger.Warn("unsubscribe failed", "channel", m.Channel, "err", err)
			}
		}
	case *redis.Subscription:
		if m.Kind != "subscribe" && m.Kind != "ssubscribe" {
			return
		}
		for _, pid := range b.subs[m.Channel] {
			ctx.Send(pid, &messages.Subscribed{Channel: m.Channel})
		}
	case *redis.Message:
		for _, pid := range b.subs[m.Channel] {
			ctx.Send(pid, &messages.Notice{Channel: m.Channel, Payload: m.Payload})
		}
	case *actor.Stopping:
		_ = b.pubsub.Close()
		<-b.done
	}
}

func (b *Bridge) start(ctx actor.Context) {
	b.pubsub = b.client.Subscribe(b.ctx)
	b.done = make(chan struct{})
	in := b.pubsub.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		defer close(b.done)
		for m := range in {
			root.Send(self, m)
		}
	}()
}
