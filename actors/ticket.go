package actors

import (
	"sync/atomic"
	"time"

	"github.com/lockwarden/lockwarden/messages"
)

// Outcome is the answer to one command.
type Outcome struct {
	// Reason is ReasonNone on success.
	Reason messages.Reason
	// Err is the underlying error when Reason is ReasonRedis, or the detail of ReasonNotSynced.
	Err error
	// HoldCount is the owner's hold count after the command.
	HoldCount int64
	// Token is the fencing token of the acquisition (acquire only).
	Token int64
	// Done is closed when the hold ends (acquire only).
	Done <-chan struct{}
	// Deleted reports whether a force unlock deleted a lock.
	Deleted bool
	// Attempts is how many Redis attempts an acquisition took.
	Attempts int
	// Tokens are the fencing tokens of a group's members, in order (0 for a member not taken).
	Tokens []int64
	// Expires is when a group hold taken with a fixed lease stops being valid; zero for watchdog holds.
	Expires time.Time
	// OK is the yes or no of an Operate: whether it took effect.
	OK bool
	// Value is the count an Operate read or left, as its Op says.
	Value int64
	// Permits are the permits a Take on a permit semaphore obtained.
	Permits []Permit
	// Pending, when set, says that the hold was granted from a local handoff before Redis confirmed
	// it (see Acquire.AcceptEarlyGrant): Redis records the new holder once Pending is resolved.
	Pending *Confirmation
}

// Confirmation is the pending confirmation by Redis of a hold granted from a local handoff before Redis
// answered the release that hands it over (see Acquire.AcceptEarlyGrant). Done is closed once Redis has
// confirmed the hold, or the hold has ended; until then Redis may still show the previous holder.
type Confirmation struct {
	done chan struct{}
}

func newConfirmation() *Confirmation { return &Confirmation{done: make(chan struct{})} }

// Done is closed once Redis has confirmed the hold, or the hold has ended.
func (c *Confirmation) Done() <-chan struct{} { return c.done }

// resolve closes Done.
func (c *Confirmation) resolve() { close(c.done) }

const (
	ticketPending int32 = iota
	ticketAbandoned
	ticketDelivered
)

// Ticket is the one-shot rendezvous between a caller and an actor. Exactly one of Abandon (by the
// caller) and deliver (by the actor) wins. A delivered outcome can always be read from Result without
// blocking for long; an abandoned ticket tells the actor to undo whatever it obtained for the caller.
type Ticket struct {
	state atomic.Int32
	// ready holds the channel closed once outcome is set (a chan struct{}), made by the first caller
	// of Ready, or closedChannel when the outcome came first: a caller that finds the outcome there
	// when it looks (Delivered) needs no channel. delivered is set once outcome is. result, for a
	// ticket from NewTicket, carries the outcome too.
	ready     atomic.Value
	delivered atomic.Bool
	outcome   Outcome
	result    chan Outcome
	notify    func(Outcome)
	// lastErr is the Redis error of the latest attempt made while the caller waited, nil once Redis
	// answered again.
	lastErr atomic.Pointer[error]
	// inflight is the lock actor's clock of its Redis attempt in flight: when it was sent, in Unix
	// nanoseconds, or 0 when none is (see Unanswered).
	inflight atomic.Pointer[atomic.Int64]
	// carry and carried hand the caller the Redis call of its command to run on its own goroutine
	// (see OpenCarry).
	carry   atomic.Int32
	carried func()
}

const (
	carryOff    int32 = iota // no call can be handed over
	carryOpen                // the caller is posting its command: a call may be handed to it
	carryHanded              // a call is in carried, for the first to claim it
	carryClosed              // claimed, or the caller finished posting
)

// OpenCarry tells the lock actor that the caller is about to post the ticket's command on its own
// goroutine, and will run the command's Redis call itself if the actor hands it over while the post
// is under way (the actor runs on the posting goroutine when it is idle: see inlineMailbox; it may also
// take the command on another goroutine before the post has returned). The caller
// must then call CloseCarry once the post has returned, and run the function it returns, if any. A call
// run so costs no handoff to another goroutine and back; the caller waits for the Redis answer anyway.
// Only a caller that cannot give up (a context that never ends) opens it: while it runs the call it
// does not watch for the end of its wait. A caller that opens it must close it as soon as its post has
// returned: a call handed over and never run stalls the lock actor, which takes no other message for
// its name until the call is answered (or it must wait for it, and runs it itself).
func (t *Ticket) OpenCarry() { t.carry.Store(carryOpen) }

// CloseCarry ends the post that OpenCarry began, and returns the Redis call the actor handed over
// meanwhile, which the caller must run; nil when it handed none.
func (t *Ticket) CloseCarry() func() {
	if t.carry.CompareAndSwap(carryOpen, carryClosed) {
		return nil
	}
	return t.claimCarried()
}

// hand offers the caller the Redis call fn to run (see OpenCarry), and reports whether the caller
// took it; if not, the actor runs it as usual.
func (t *Ticket) hand(fn func()) bool {
	if t == nil || t.carry.Load() != carryOpen {
		return false
	}
	t.carried = fn // read only by whoever sees carryHanded
	if t.carry.CompareAndSwap(carryOpen, carryHanded) {
		return true
	}
	t.carried = nil
	return false
}

// claimCarried returns the call handed over and not yet run, for the first who claims it (the
// caller, or the actor if it must wait for the call before the caller has run it); nil otherwise.
func (t *Ticket) claimCarried() func() {
	if t == nil || !t.carry.CompareAndSwap(carryHanded, carryClosed) {
		return nil
	}
	fn := t.carried
	t.carried = nil
	return fn
}

// watch lets the caller see the lock actor's attempts in flight (see Unanswered).
func (t *Ticket) watch(inflight *atomic.Int64) { t.inflight.Store(inflight) }

// Unanswered returns how long the lock actor's Redis attempt in flight has gone unanswered, 0 when
// none is in flight. A caller whose wait ends while Redis has not answered for long reports that,
// rather than a lock held by another owner.
func (t *Ticket) Unanswered() time.Duration {
	p := t.inflight.Load()
	if p == nil {
		return 0
	}
	sent := p.Load()
	if sent == 0 {
		return 0
	}
	return time.Since(time.Unix(0, sent))
}

// noteError records the outcome of the latest attempt for the caller: err when it failed on a Redis
// error, nil when Redis answered.
func (t *Ticket) noteError(err error) {
	if err == nil {
		t.lastErr.Store(nil)
		return
	}
	t.lastErr.Store(&err)
}

// LastError returns the Redis error of the latest attempt made for the caller, or nil when that
// attempt got an answer from Redis (or none was made). A caller that gave up reports it, so that a
// wait that ended while Redis was unreachable does not read as a lock held by another owner.
func (t *Ticket) LastError() error {
	if p := t.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// NewTicket returns a pending ticket, whose outcome can be read with Ready and Outcome, or from Result.
func NewTicket() *Ticket {
	return &Ticket{result: make(chan Outcome, 1)}
}

// Init makes the zero Ticket t a pending ticket whose outcome is read with Delivered or Ready, and
// Outcome (Result is nil), and returns it. It lets a caller allocate a ticket together with its
// command, and saves the allocation of Result's channel. Init must not be called on a ticket in use.
func (t *Ticket) Init() *Ticket { return t }

// closedChannel is the Ready channel of every ticket whose outcome came before anyone asked for one.
var closedChannel = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Ready returns a channel that is closed once the outcome is delivered (nil for a ticket from
// NewTicketFunc). The channel is made at the first call, unless the outcome is there already: a
// caller that looks at Delivered first, and finds it, makes none.
func (t *Ticket) Ready() <-chan struct{} {
	if t.notify != nil {
		return nil
	}
	if ch, ok := t.ready.Load().(chan struct{}); ok {
		return ch
	}
	ch := make(chan struct{})
	if t.ready.CompareAndSwap(nil, ch) {
		return ch
	}
	return t.ready.Load().(chan struct{})
}

// parked reports whether the caller asked for the Ready channel before the outcome was delivered: it
// waited on it (it may not have parked yet), and the delivery woke it. False for a nil ticket.
func (t *Ticket) parked() bool {
	if t == nil {
		return false
	}
	ch, ok := t.ready.Load().(chan struct{})
	return ok && ch != closedChannel
}

// Delivered reports whether the outcome has been delivered; Outcome may then be read. It is always
// false for a ticket from NewTicketFunc, whose outcome goes to its function.
func (t *Ticket) Delivered() bool { return t.delivered.Load() }

// Outcome returns the delivered outcome; call it once Ready is closed or Delivered is true.
func (t *Ticket) Outcome() Outcome { return t.outcome }

// NewTicketFunc returns a pending ticket whose outcome is passed to notify instead of Result. notify
// runs on the actor's goroutine and must not block.
func NewTicketFunc(notify func(Outcome)) *Ticket {
	return &Ticket{notify: notify}
}

// Result returns the channel on which the outcome arrives, for a ticket from NewTicket (nil for a
// ticket from NewTicketFunc or Init).
func (t *Ticket) Result() <-chan Outcome { return t.result }

// Abandon reports whether the caller gave up before an outcome was delivered. When it returns false
// the outcome is already on its way and must be read from Result.
func (t *Ticket) Abandon() bool {
	return t.state.CompareAndSwap(ticketPending, ticketAbandoned)
}

// Abandoned reports whether the caller gave up.
func (t *Ticket) Abandoned() bool { return t.state.Load() == ticketAbandoned }

// deliver hands the outcome to the caller and reports whether the caller was still waiting.
func (t *Ticket) deliver(o Outcome) bool {
	if !t.state.CompareAndSwap(ticketPending, ticketDelivered) {
		return false
	}
	if t.notify != nil {
		t.notify(o)
		return true
	}
	t.outcome = o
	t.delivered.Store(true)
	// Whoever asked for the channel before now gets it closed; whoever asks after gets closedChannel.
	if !t.ready.CompareAndSwap(nil, closedChannel) {
		close(t.ready.Load().(chan struct{}))
	}
	if t.result != nil {
		t.result <- o
	}
	return true
}
