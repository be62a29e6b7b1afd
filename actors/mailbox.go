package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// inlineMailbox is a lock actor's mailbox. It works as protoactor's default mailbox (system messages
// first, then user messages in the order posted, one goroutine at a time, a turn of at most the
// dispatcher's throughput before it yields), with one difference: a message posted to an idle actor
// whose handling never waits on anything (inlineSafe) runs on the posting goroutine at once, rather
// than on a goroutine of the dispatcher. That is a caller's Acquire or Release on a reentrant lock
// whose call goes to Redis without the actor waiting (the caller waits for the answer anyway), and
// the answer of a call (batchDone) on the goroutine that made the call: a goroutine of the actor's,
// which has nothing else to do, or the caller that ran its own call, when the settlement waits on
// nothing (settlesAtOnce).
// Each saves the handoff to another goroutine, which on a machine with idle CPUs costs the wake-up of
// one. Any other message, or one that finds the actor busy, goes through the dispatcher; a turn that
// runs inline stops before the first message that is not safe, or after the dispatcher's throughput of
// messages, and the dispatcher takes over.
type inlineMailbox struct {
	mu     sync.Mutex
	user   fifo
	system fifo

	status    atomic.Int32 // mailboxIdle or mailboxRunning
	userN     atomic.Int32
	systemN   atomic.Int32
	suspended atomic.Bool

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	// processFn is process, bound once: a method value made at each Schedule would be an allocation.
	processFn func()
	// safe reports whether a message may run on the posting goroutine; it is called only while the
	// mailbox is running on that goroutine, so it may read the actor's state.
	safe func(msg any) bool
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

var _ actor.Mailbox = (*inlineMailbox)(nil)

// newInlineMailbox returns the producer of the mailbox of a lock actor whose inlineSafe is safe.
func newInlineMailbox(safe func(msg any) bool) actor.MailboxProducer {
	return func() actor.Mailbox { return &inlineMailbox{safe: safe} }
}

// PostUserMessage implements actor.Mailbox.
func (m *inlineMailbox) PostUserMessage(msg any) {
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
	m.userN.Add(1)
	if !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		return // the goroutine running the actor takes it
	}
	// Only a poster whose own message is safe runs the mailbox: a poster of another message (the
	// guardian routing, the bridge forwarding a notice) must not end up running the Redis calls that
	// other callers' safe messages, queued just before, carry.
	if m.systemN.Load() == 0 && !m.suspended.Load() && m.safe(msg) && m.runInline() {
		return
	}
	m.dispatcher.Schedule(m.processFn)
}

// PostSystemMessage implements actor.Mailbox.
func (m *inlineMailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system.push(msg)
	m.mu.Unlock()
	m.systemN.Add(1)
	m.schedule()
}

// RegisterHandlers implements actor.Mailbox.
func (m *inlineMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
	m.processFn = m.process
}

// Start implements actor.Mailbox.
func (m *inlineMailbox) Start() {}

// UserMessageCount implements actor.Mailbox.
func (m *inlineMailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *inlineMailbox) schedule() {
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		m.dispatcher.Schedule(m.processFn)
	}
}

// runInline runs, on the calling goroutine, the user messages at the head of the queue while each is
// safe, at most the dispatcher's throughput of them: the poster's goroutine is not kept past one turn
// by the messages that others post meanwhile. It reports whether it left the mailbox idle with nothing
// to do; if not, the mailbox is still running and the caller hands it to the dispatcher.
func (m *inlineMailbox) runInline() bool {
	for n, limit := 0, max(m.dispatcher.Throughput(), 1); ; n++ {
		if n == limit {
			return false
		}
		m.mu.Lock()
		if m.system.len() > 0 || m.user.len() == 0 || m.suspended.Load() || !m.safe(m.user.peek()) {
			empty := m.system.len() == 0 && m.user.len() == 0
			m.mu.Unlock()
			if !empty {
				return false
			}
			return m.idle()
		}
		msg := m.user.pop()
		m.mu.Unlock()
		m.userN.Add(-1)
		m.invokeUser(msg)
	}
}

// idle sets the mailbox idle, and reports false when it took it back to run messages posted
// meanwhile (the caller then hands it to the dispatcher).
func (m *inlineMailbox) idle() bool {
	m.status.Store(mailboxIdle)
	if m.systemN.Load() > 0 || (!m.suspended.Load() && m.userN.Load() > 0) {
		return !m.status.CompareAndSwap(mailboxIdle, mailboxRunning)
	}
	return true
}

// process runs the mailbox on a goroutine of the dispatcher, as protoactor's default mailbox does.
func (m *inlineMailbox) process() {
	for {
		m.run()
		if m.idle() {
			return
		}
	}
}

func (m *inlineMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, throughput := 0, m.dispatcher.Throughput()
	for {
		if i > throughput {
			i = 0
			runtime.Gosched()
		}
		i++
		m.mu.Lock()
		if m.system.len() > 0 {
			msg = m.system.pop()
			m.mu.Unlock()
			m.systemN.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() || m.user.len() == 0 {
			m.mu.Unlock()
			return
		}
		msg = m.user.pop()
		m.mu.Unlock()
		m.userN.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

// fifo is a queue of messages that keeps its array.
type fifo struct {
	items []any
	head  int
}

func (q *fifo) len() int  { return len(q.items) - q.head }
func (q *fifo) peek() any { return q.items[q.head] }

func (q *fifo) push(msg any) { q.items = append(q.items, msg) }

func (q *fifo) pop() any {
	msg := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return msg
}

// invokeUser runs one user message on the calling goroutine, escalating a panic as run does.
func (m *inlineMailbox) invokeUser(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	m.invoker.InvokeUserMessage(msg)
}
