package messages

import "github.com/asynkron/protoactor-go/actor"

// Subscribe asks the pub/sub bridge to forward the messages of Channel to Subscriber. The bridge answers
// with [Subscribed] each time Redis confirms the subscription, including after a reconnect.
type Subscribe struct {
	// Channel is the Redis pub/sub channel (a shard channel on Redis Cluster), as named in Redis.
	Channel string
	// Subscriber is the actor that gets the channel's [Notice] and [Subscribed] messages; it must not
	// be nil. Subscribing it again to a channel it has is harmless: it still gets each Notice once.
	Subscriber *actor.PID
}

// Unsubscribe withdraws a [Subscribe].
type Unsubscribe struct {
	// Channel is the channel of the Subscribe. The bridge unsubscribes from it in Redis when its last
	// subscriber leaves.
	Channel string
	// Subscriber is the actor of the Subscribe; one that is not subscribed is ignored.
	Subscriber *actor.PID
}

// Subscribed tells a lock actor that its channel subscription is confirmed, so that a retry from now on
// cannot miss an unlock notice.
type Subscribed struct {
	// Channel is the channel whose subscription Redis confirmed.
	Channel string
}

// Notice carries one message published on a lock channel.
type Notice struct {
	// Channel is the channel the message was published on.
	Channel string
	// Payload is the message as published, unchanged.
	Payload string
}
