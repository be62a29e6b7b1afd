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
	// Run after every message: it must not cost a map entry per waiter. The waiters of a plain or
	// read-write lock share one channel, and a fair lock's waiters of one owner follow each other:
	// a channel equal to the one before it is not added again.
	if a.want == nil {
		a.want = make(map[string]struct{})
	}
	want := a.want
	clear(want)
	last, found := "", false
	for _, m := range a.queue {
		if m.Ticket.Abandoned() {
			continue
		}
		if ch := a.proto.channel(m); !found || ch != last {
			want[ch] = struct{}{}
			last, found = ch, true
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
