package actors

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestInlineSafeSkipsEndedHold: an acquisition whose owner's hold of that kind has ended (Done
// closed) does not run on the posting goroutine: the actor gives that hold back first, a call it
// waits for.
func TestInlineSafeSkipsEndedHold(t *testing.T) {
	a := newTestLockActor(t, &fakeProtocol{asyncCalls: true}, 30*time.Second)
	m := &Acquire{Name: a.name, Kind: KindPlain, Owner: "a", Lease: time.Minute, Ticket: NewTicket()}
	if !a.inlineSafe(m) {
		t.Fatal("a first acquisition on a reentrant lock is not inline-safe")
	}
	_, h := addHold(a, "a", time.Minute, true, false)
	if !a.inlineSafe(m) {
		t.Fatal("a re-entry of a live hold is not inline-safe")
	}
	h.end()
	if a.inlineSafe(m) {
		t.Fatal("a re-entry of an ended hold is inline-safe")
	}
}

// recordingInvoker records the messages a mailbox hands it, and checks that it is never entered by
// two goroutines at once.
type recordingInvoker struct {
	busy    atomic.Bool
	overlap atomic.Bool
	mu      sync.Mutex
	user    []any
	system  []any
	// onUser, when set, runs for each user message, inside the invoker.
	onUser func(msg any)
	// all, when set, is closed once want messages (user and system) have been handled.
	all  chan struct{}
	want int
}

// count notes one more message handled; r.mu is held.
func (r *recordingInvoker) count() {
	if r.all != nil && len(r.user)+len(r.system) == r.want {
		close(r.all)
	}
}

func (r *recordingInvoker) enter() func() {
	if !r.busy.CompareAndSwap(false, true) {
		r.overlap.Store(true)
	}
	return func() { r.busy.Store(false) }
}

func (r *recordingInvoker) InvokeSystemMessage(msg any) {
	defer r.enter()()
	r.mu.Lock()
	r.system = append(r.system, msg)
	r.count()
	r.mu.Unlock()
}

func (r *recordingInvoker) InvokeUserMessage(msg any) {
	defer r.enter()()
	r.mu.Lock()
	r.user = append(r.user, msg)
	r.count()
	r.mu.Unlock()
	if r.onUser != nil {
		r.onUser(msg)
	}
}

func (r *recordingInvoker) EscalateFailure(reason, msg any) {
	panic(fmt.Sprintf("escalated on %v: %v", msg, reason))
}

// heldDispatcher keeps what is scheduled until the test runs it.
type heldDispatcher struct {
	throughput int
	queued     []func()
}

func (d *heldDispatcher) Schedule(fn func()) { d.queued = append(d.queued, fn) }
func (d *heldDispatcher) Throughput() int    { return d.throughput }

// mailboxMsg is a message of the mailbox tests: poster's n-th, safe to run inline or not.
type mailboxMsg struct {
	poster, n int
	safe      bool
}

// TestInlineMailboxRunsSafeMessageOnPoster: a safe message posted to an idle mailbox runs on the
// posting goroutine, before the post returns; one that is not safe goes to the dispatcher.
func TestInlineMailboxRunsSafeMessageOnPoster(t *testing.T) {
	inv := &recordingInvoker{}
	d := &heldDispatcher{throughput: 10}
	mb := newInlineMailbox(func(msg any) bool { return msg.(mailboxMsg).safe })().(*inlineMailbox)
	mb.RegisterHandlers(inv, d)
	mb.PostUserMessage(mailboxMsg{n: 1, safe: true})
	if len(inv.user) != 1 || len(d.queued) != 0 {
		t.Fatalf("after a safe post: handled %v, %d scheduled; want it handled inline", inv.user, len(d.queued))
	}
	mb.PostUserMessage(mailboxMsg{n: 2})
	if len(inv.user) != 1 || len(d.queued) != 1 {
		t.Fatalf("after an unsafe post: handled %v, %d scheduled; want it scheduled", inv.user, len(d.queued))
	}
	d.queued[0]()
	if len(inv.user) != 2 {
		t.Fatalf("handled %v, want both", inv.user)
	}
}

// TestInlineMailboxBoundsTheInlineTurn: the messages posted while a safe message runs inline run on
// the poster's goroutine up to the dispatcher's throughput; the rest go to the dispatcher.
func TestInlineMailboxBoundsTheInlineTurn(t *testing.T) {
	const throughput, more = 5, 20
	inv := &recordingInvoker{}
	d := &heldDispatcher{throughput: throughput}
	mb := newInlineMailbox(func(msg any) bool { return msg.(mailboxMsg).safe })().(*inlineMailbox)
	mb.RegisterHandlers(inv, d)
	inv.onUser = func(msg any) {
		if msg.(mailboxMsg).n == 0 {
			for i := 1; i <= more; i++ {
				mb.PostUserMessage(mailboxMsg{n: i, safe: true})
			}
		}
	}
	mb.PostUserMessage(mailboxMsg{n: 0, safe: true})
	if got := len(inv.user); got != throughput {
		t.Fatalf("%d messages ran on the posting goroutine, want %d (the throughput)", got, throughput)
	}
	if len(d.queued) != 1 {
		t.Fatalf("%d turns scheduled, want 1", len(d.queued))
	}
	d.queued[0]()
	if got := len(inv.user); got != more+1 {
		t.Fatalf("%d messages handled in all, want %d", got, more+1)
	}
	for i, msg := range inv.user {
		if msg.(mailboxMsg).n != i {
			t.Fatalf("handled out of order: %v", inv.user)
		}
	}
}

// TestInlineMailboxManyPosters: posters send safe and unsafe user messages and system messages at
// once, through a real dispatcher. Each message is handled exactly once, each poster's user messages
// in the order posted, and never on two goroutines at once.
func TestInlineMailboxManyPosters(t *testing.T) {
	const posters, each = 8, 500
	inv := &recordingInvoker{all: make(chan struct{}), want: posters*each + posters*each/50}
	pool := NewWorkerPool(2, 7)
	t.Cleanup(pool.Stop)
	mb := newInlineMailbox(func(msg any) bool { return msg.(mailboxMsg).safe })().(*inlineMailbox)
	mb.RegisterHandlers(inv, pool)
	var wg sync.WaitGroup
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				mb.PostUserMessage(mailboxMsg{poster: p, n: n, safe: (n+p)%3 != 0})
				if n%50 == 0 {
					mb.PostSystemMessage(mailboxMsg{poster: p, n: n})
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-inv.all:
	case <-time.After(10 * time.Second):
		inv.mu.Lock()
		defer inv.mu.Unlock()
		t.Fatalf("handled %d user and %d system messages within 10s, want %d and %d", len(inv.user), len(inv.system), posters*each, posters*each/50)
	}
	if inv.overlap.Load() {
		t.Fatal("the invoker ran on two goroutines at once")
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if len(inv.user) != posters*each || len(inv.system) != posters*each/50 {
		t.Fatalf("handled %d user and %d system messages, want %d and %d", len(inv.user), len(inv.system), posters*each, posters*each/50)
	}
	next := make([]int, posters)
	for _, msg := range inv.user {
		m := msg.(mailboxMsg)
		if m.n != next[m.poster] {
			t.Fatalf("poster %d: got message %d, want %d", m.poster, m.n, next[m.poster])
		}
		next[m.poster]++
	}
	if mb.UserMessageCount() != 0 {
		t.Fatalf("%d user messages counted as waiting, want 0", mb.UserMessageCount())
	}
}
