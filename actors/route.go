package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Route is the binding of an actor to one lock name, as a handle keeps it to send its commands to the
// actor itself, without the guardian: after the first command of a handle (see [Locate]), its others
// skip a hop and a turn of the coordinator-wide guardian, which every command would otherwise share.
//
// The guardian recycles an actor only once every command sent to it has arrived, and a handle's
// command can be sent only while the binding stands. Both are decided on one counter: Enter counts a
// command that a handle is about to send, the guardian counts those it routes itself, and the guardian
// retires the route, with a compare-and-swap of the counter, only when it equals the count of
// commands the actor reports it has received. A handle whose Enter fails (the route is retired: its
// actor went idle and may serve another name by now) asks the guardian again.
type Route struct {
	pid *actor.PID
	// sent counts the commands sent to the actor for this binding; retiredBit is set once the guardian
	// has unbound it.
	sent atomic.Uint64
}

// retiredBit marks a retired route's counter.
const retiredBit = 1 << 63

// Enter counts one command about to be sent to the route's actor and returns the actor's PID; it
// reports false, counting nothing, when the route is retired.
func (r *Route) Enter() (*actor.PID, bool) {
	for {
		n := r.sent.Load()
		if n&retiredBit != 0 {
			return nil, false
		}
		if r.sent.CompareAndSwap(n, n+1) {
			return r.pid, true
		}
	}
}

// count counts a command the guardian routes itself; the guardian alone retires, so the route is live.
func (r *Route) count() { r.sent.Add(1) }

// retire unbinds the route if received, the commands its actor reports it has received, are all that
// were sent to it, and reports whether it did. After it, Enter fails.
func (r *Route) retire(received uint64) bool {
	return r.sent.CompareAndSwap(received, received|retiredBit)
}
