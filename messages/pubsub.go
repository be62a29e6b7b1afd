package messages

import "github.com/asynkron/protoactor-go/actor"

// Subscribe asks the pub/sub bridge to forward the messages of Channel to Subscriber. The bridge answers
// with [Subscribed] each time Redis confirms the subscription, including after a reconnect.
type Subscribe struct {
	Channel    string
	Subscriber *actor.PID
}

// Unsubscribe withdraws a [Subscribe].
type Unsubscribe struct {
	Channel    string
	Subscriber *actor.PID
}

// Subscribed tells a lock actor that its channel subscription is confirmed, so that a retry from now on
// cannot miss an unlock notice.
type Subscribed struct {
	Channel string
}

// Notice carries one message published on a lock channel.
type Notice struct {
	Channel string
	Payload string
}
