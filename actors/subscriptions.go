package actors

import (
	"github.com/lockwarden/lockwarden/messages"
)

// syncSubscriptions subscribes the channels on which the waiters are woken (protocol.channel), and
// keeps those the strategy keeps (strategy.keepChannels): a plain or read-write lock's one channel until
// the actor is idle, so that busy locks don't subscribe and unsubscribe on every handoff; a fair lock's
// channel per waiting owner for a while after that owner stopped waiting.
func (a *lockActor) syncSubscriptions() {
	if len(a.queue) == 0 && len(a.subs) == 0 {
		return // the common uncontended case: nothing to do
	}
	want := make(map[string]struct{}, len(a.queue))
	for _, m := range a.queue {
		if !m.Ticket.Abandoned() {
			want[a.proto.channel(m)] = struct{}{}
		}
	}
	a.proto.keepChannels(a, want)
	for ch := range want {
		if _, ok := a.subs[ch]; !ok {
			a.subs[ch] = struct{}{}
			a.root.Send(a.env.Bridge, &messages.Subscribe{Channel: ch, Subscriber: a.self})
		}
	}
	for ch := range a.subs {
		if _, ok := want[ch]; !ok {
			delete(a.subs, ch)
			a.root.Send(a.env.Bridge, &messages.Unsubscribe{Channel: ch, Subscriber: a.self})
		}
	}
}

// onNotice takes a message published on a channel the actor subscribed; the strategy reads it.
func (a *lockActor) onNotice(m *messages.Notice) {
	if _, ok := a.subs[m.Channel]; !ok {
		return
	}
	a.proto.notice(a, m)
}
