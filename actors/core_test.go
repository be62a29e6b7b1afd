package actors

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// The tests in this file drive the lock actor's core (queue, holds, watchdog, subscriptions, stash)
// through a real actor system with modelLock as its strategy: no Redis.

// modelLock is a fake strategy for the reentrant lock: it answers the actor's calls as the Redis
// scripts would from a model of one lock (its holder and hold count), records every call once the
// model has answered it, and can hold the answers back (gate) so that a test sees what the actor does
// while a call is in flight.
type modelLock struct {
	plainStrategy
	asyncCalls bool
	// panicNext, when set, makes the next acquire panic.
	panicNext atomic.Bool
	// renewErr, when set, is the answer to every renewal.
	renewErr error
	// releaseErrs are the answers to the next releases, one each, before any changes the model (a
	// release whose reply was lost, or a stale one); requestIDs records every release's request id.
	releaseErrs []error
	requestIDs  []string
	// releaseTokens records the token every release was sent with (see hold.fencedToken); a release
	// sent with none goes through the owner's latch, which its answer reports (Released.Latched).
	releaseTokens []int64

	mu     sync.Mutex
	holder string
	count  int64
	token  int64
	calls  []string
	// gate, when not nil, holds every acquire and release back until it is closed; started then
	// receives the call's name as it arrives.
	gate    chan struct{}
	started chan string
	// called receives the name of every call once it is recorded.
	called chan string
}

func newModelLock() *modelLock { return &modelLock{called: make(chan string, 256)} }

func (p *modelLock) record(call string) {
	p.mu.Lock()
	p.calls = append(p.calls, call)
	gate, started := p.gate, p.started
	p.mu.Unlock()
	p.called <- call
	if gate != nil {
		started <- call
		<-gate
	}
}

// callLog returns the calls made so far.
func (p *modelLock) callLog() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// take gives the modelled lock to owner, as another process's acquisition would.
func (p *modelLock) take(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holder, p.count = owner, 1
	p.token++
}

// free frees the modelled lock, as its holder's release in another process would.
func (p *modelLock) free() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holder, p.count = "", 0
}

func (p *modelLock) async() bool { return p.asyncCalls }

func (p *modelLock) acquire(_ context.Context, m *Acquire, _ int64, _ bool) (redisops.Acquired, error) {
	if p.panicNext.CompareAndSwap(true, false) {
		panic("injected failure in a call")
	}
	defer p.record("acquire " + m.Owner)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.holder {
	case "":
		p.token++
		p.holder, p.count = m.Owner, 1
	case m.Owner:
		p.count++
	default:
		return redisops.Acquired{TTL: time.Minute}, nil
	}
	return redisops.Acquired{OK: true, HoldCount: p.count, Token: p.token}, nil
}

func (p *modelLock) release(_ context.Context, k holdKey, _ string, _ time.Duration, next *redisops.Handoff) (redisops.Released, error) {
	call := "release " + k.owner
	if next != nil {
		call += " to " + next.Owner
	}
	defer p.record(call)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holder != k.owner {
		return redisops.Released{}, redisops.ErrNotHeld
	}
	if p.count--; p.count > 0 {
		return redisops.Released{Remaining: p.count}, nil
	}
	p.holder = ""
	if next != nil {
		p.token++
		p.holder, p.count = next.Owner, 1
		return redisops.Released{HandedOff: true, Next: next.Owner, Token: p.token}, nil
	}
	return redisops.Released{}, nil
}

func (p *modelLock) releaseHeld(ctx context.Context, k holdKey, requestID string, lease time.Duration, _, token int64, next *redisops.Handoff) (redisops.Released, error) {
	p.mu.Lock()
	p.requestIDs = append(p.requestIDs, requestID)
	p.releaseTokens = append(p.releaseTokens, token)
	if len(p.releaseErrs) > 0 {
		err := p.releaseErrs[0]
		p.releaseErrs = p.releaseErrs[1:]
		p.mu.Unlock()
		p.record("release " + k.owner + " failed")
		return redisops.Released{}, err
	}
	p.mu.Unlock()
	rel, err := p.release(ctx, k, requestID, lease, next)
	rel.Latched = err == nil && (token == 0 || next != nil)
	return rel, err
}

func (p *modelLock) renew(_ context.Context, k holdKey, _ time.Duration) error {
	p.record("renew " + k.owner)
	return p.renewErr
}

func (p *modelLock) renewMany(_ context.Context, ks []holdKey, _ time.Duration) []error {
	errs := make([]error, len(ks))
	for i, k := range ks {
		p.record("renew " + k.owner)
		errs[i] = p.renewErr
	}
	return errs
}

func (p *modelLock) forceUnlock(context.Context, Kind) (bool, error) { return false, nil }

func (p *modelLock) holdCount(_ context.Context, k holdKey) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holder == k.owner {
		return p.count, nil
	}
	return 0, nil
}

func (p *modelLock) leave(context.Context, *Acquire, bool) error { return nil }

func (p *modelLock) channel(*Acquire) string { return "lock-channel" }

// eventLog records the events the actor publishes.
type eventLog struct {
	mu     sync.Mutex
	events []messages.Event
	// lost receives the owner of every Lost event.
	lost chan string
}

func (l *eventLog) Publish(ev messages.Event) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
	if ev.Type == messages.EventLost {
		l.lost <- ev.Owner
	}
}

func (l *eventLog) types(owner string) []messages.EventType {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []messages.EventType
	for _, ev := range l.events {
		if ev.Owner == owner {
			out = append(out, ev.Type)
		}
	}
	return out
}

// core is a lock actor whose strategy is a modelLock (another strategy in a benchmark, with model and
// events nil), running in an actor system of its own, with a timer service and a pub/sub bridge that
// confirms every subscription at once.
type core struct {
	// mailbox is the lock actor's inline mailbox (startCore with inline), nil for protoactor's default
	// one.
	mailbox *inlineMailbox
	t       testing.TB
	pid     *actor.PID
	root    *actor.RootContext
	model   *modelLock
	events  *eventLog
	subbed  chan string
	name    string
	timeout time.Duration
}

func newCore(t *testing.T, model *modelLock, watchdog time.Duration) *core {
	t.Helper()
	return newCoreMailbox(t, model, watchdog, false)
}

// newCoreMailbox is newCore, with the lock actor on the inline mailbox of the coordinator's lock
// actors (inline) rather than protoactor's default one.
func newCoreMailbox(t *testing.T, model *modelLock, watchdog time.Duration, inline bool) *core {
	t.Helper()
	c := &core{t: t, model: model, events: &eventLog{lost: make(chan string, 16)}, name: t.Name()}
	startCore(t, c, model, c.events, watchdog, inline)
	return c
}

// startCore starts c's lock actor, named c.name, with proto as its strategy and events as its event
// sink, in an actor system of its own that stops at t's cleanup.
func startCore(t testing.TB, c *core, proto strategy, events EventSink, watchdog time.Duration, inline bool) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	c.root, c.subbed, c.timeout = system.Root, make(chan string, 64), 10*time.Second
	bridge := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.Subscribe); ok {
			c.subbed <- m.Channel
			ctx.Send(m.Subscriber, &messages.Subscribed{Channel: m.Channel})
		}
	}))
	var ids atomic.Int64
	env := &Env{
		WatchdogTimeout: watchdog, IdleTimeout: time.Minute, StopReleaseTimeout: time.Second,
		Context: context.Background(), Logger: slog.New(slog.DiscardHandler),
		NewRequestID: func() string { return "req-" + strconv.FormatInt(ids.Add(1), 10) },
		Held:         &HeldKinds{}, NewBackOff: DefaultBackOff,
		Bridge: bridge, Events: events, MaxHandoffs: 10,
		Ops: &redisops.Ops{}, // asked only whether replicas are waited for: they are not
	}
	timers := NewTimers(func(pid *actor.PID, msg any) { system.Root.Send(pid, msg) })
	a := newLockActor(c.name, c.name, familyPlain, env)
	a.proto, a.timers = proto, timers
	var opts []actor.PropsOption
	if inline {
		c.mailbox = &inlineMailbox{safe: a.inlineSafe}
		opts = append(opts, actor.WithMailbox(func() actor.Mailbox { return c.mailbox }))
	}
	c.pid = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }, opts...))
	t.Cleanup(func() {
		_ = system.Root.StopFuture(c.pid).Wait()
		timers.Stop()
		system.Shutdown()
	})
}

// waitIdle waits until the lock actor's inline mailbox is idle: no goroutine runs the actor.
func (c *core) waitIdle() {
	c.t.Helper()
	deadline := time.Now().Add(c.timeout)
	for c.mailbox.status.Load() != mailboxIdle || c.mailbox.userN.Load() > 0 {
		if time.Now().After(deadline) {
			c.t.Fatalf("the lock actor was not idle within %v", c.timeout)
		}
		runtime.Gosched()
	}
}

// acquire sends an acquisition of owner with a fixed lease of a minute; wait queues it.
func (c *core) acquire(owner string, wait bool, tk *Ticket) *Ticket {
	if tk == nil {
		tk = NewTicket()
	}
	c.root.Send(c.pid, &Acquire{Name: c.name, Kind: KindPlain, Owner: owner, Lease: time.Minute, Wait: wait, Started: time.Now(), Ticket: tk})
	return tk
}

func (c *core) release(owner string, tk *Ticket) *Ticket {
	if tk == nil {
		tk = NewTicket()
	}
	c.root.Send(c.pid, &Release{Name: c.name, Kind: KindPlain, Owner: owner, Ticket: tk})
	return tk
}

// outcome waits for the answer on tk.
func (c *core) outcome(tk *Ticket, what string) Outcome {
	c.t.Helper()
	select {
	case o := <-tk.Result():
		return o
	case <-time.After(c.timeout):
		c.t.Fatalf("%s: no answer within %v", what, c.timeout)
		return Outcome{}
	}
}

// pending reports whether tk is still unanswered.
func pending(tk *Ticket) bool {
	select {
	case <-tk.Ready():
		return false
	default:
		return true
	}
}

// waitCall waits until the model records call.
func (c *core) waitCall(call string) {
	c.t.Helper()
	deadline := time.After(c.timeout)
	for {
		select {
		case got := <-c.model.called:
			if got == call {
				return
			}
		case <-deadline:
			c.t.Fatalf("the model saw no %q within %v; calls: %q", call, c.timeout, c.model.callLog())
		}
	}
}

func granted(t *testing.T, o Outcome, what string, count int64) {
	t.Helper()
	if o.Reason != messages.ReasonNone || o.Err != nil || o.HoldCount != count || o.Done == nil {
		t.Fatalf("%s: got reason %v err %v count %d, want held with count %d", what, o.Reason, o.Err, o.HoldCount, count)
	}
}

// TestCoreQueueIsFIFO: local waiters queue behind the local holder without asking Redis, and each
// release hands the lock to the earliest waiter in the same call, one after the other.
func TestCoreQueueIsFIFO(t *testing.T) {
	c := newCore(t, newModelLock(), 30*time.Second)
	granted(t, c.outcome(c.acquire("a", false, nil), "a"), "a", 1)
	waiters := []string{"b", "c", "d"}
	tickets := map[string]*Ticket{}
	for _, w := range waiters {
		tickets[w] = c.acquire(w, true, nil)
	}
	holder := "a"
	for i, w := range waiters {
		if o := c.outcome(c.release(holder, nil), "release of "+holder); o.Reason != messages.ReasonNone {
			t.Fatalf("release of %s: got %v, want released", holder, o.Reason)
		}
		// The next holder is answered before the release is.
		o := tickets[w].Outcome()
		if pending(tickets[w]) {
			t.Fatalf("%s not granted by %s's release", w, holder)
		}
		granted(t, o, w, 1)
		for _, later := range waiters[i+1:] {
			if !pending(tickets[later]) {
				t.Fatalf("%s answered before %s, want FIFO", later, w)
			}
		}
		holder = w
	}
	want := []string{"acquire a", "release a to b", "release b to c", "release c to d"}
	if got := c.model.callLog(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q (waiters make no attempt of their own)", got, want)
	}
	if got := c.events.types("b"); !slices.Contains(got, messages.EventHandedOff) || !slices.Contains(got, messages.EventWaitStarted) {
		t.Errorf("events of b %v, want a wait and a handoff", got)
	}
}

// TestCoreReentry: a second acquisition of the holder re-enters: the hold count goes up, the Done
// channel is the same, and the hold ends only with the last release.
func TestCoreReentry(t *testing.T) {
	c := newCore(t, newModelLock(), 30*time.Second)
	first := c.outcome(c.acquire("a", false, nil), "first")
	granted(t, first, "first", 1)
	second := c.outcome(c.acquire("a", false, nil), "re-entry")
	granted(t, second, "re-entry", 2)
	if first.Done != second.Done {
		t.Error("the re-entry has another Done channel than the first hold")
	}
	if o := c.outcome(c.release("a", nil), "inner release"); o.HoldCount != 1 || o.Reason != messages.ReasonNone {
		t.Fatalf("inner release: got %v count %d, want released with 1 left", o.Reason, o.HoldCount)
	}
	select {
	case <-first.Done:
		t.Fatal("Done closed with a hold left")
	default:
	}
	if o := c.outcome(c.release("a", nil), "outer release"); o.HoldCount != 0 || o.Reason != messages.ReasonNone {
		t.Fatalf("outer release: got %v count %d, want released with none left", o.Reason, o.HoldCount)
	}
	select {
	case <-first.Done:
	default:
		t.Fatal("Done still open after the last release")
	}
	if got, want := c.model.callLog(), []string{"acquire a", "acquire a", "release a", "release a"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// TestCoreReleaseRetryID: an Unlock whose release failed with its outcome unknown (a lost reply)
// sends the same request again when called again, so that the release script answers what the first
// run did; one refused as stale (a release of the owner sequenced after it has run) sends a new one.
func TestCoreReleaseRetryID(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		sameID bool
	}{
		{"lost reply", errors.New("connection reset"), true},
		{"stale", redisops.ErrStaleRelease, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			model := newModelLock()
			c := newCore(t, model, 30*time.Second)
			granted(t, c.outcome(c.acquire("a", false, nil), "acquire"), "acquire", 1)
			model.mu.Lock()
			model.releaseErrs = []error{tt.err}
			model.mu.Unlock()
			if o := c.outcome(c.release("a", nil), "failed release"); o.Reason != messages.ReasonRedis {
				t.Fatalf("failed release: got %v (err %v), want ReasonRedis", o.Reason, o.Err)
			}
			if o := c.outcome(c.release("a", nil), "second release"); o.Reason != messages.ReasonNone || o.HoldCount != 0 {
				t.Fatalf("second release: got %v (err %v) count %d, want released", o.Reason, o.Err, o.HoldCount)
			}
			model.mu.Lock()
			ids := slices.Clone(model.requestIDs)
			model.mu.Unlock()
			if len(ids) != 2 || (ids[0] == ids[1]) != tt.sameID {
				t.Errorf("request ids %q: want the same id twice = %v", ids, tt.sameID)
			}
		})
	}
}

// TestCoreLockAfterFailedRelease: a Lock of an owner whose release of its last hold failed (its
// Unlock counted as done) sends that release again, with the same request id, before its acquisition,
// which takes a hold of its own (count 1), not a re-entry of the hold whose release was unknown. When
// the release fails again, a TryLock answers the Redis error and the hold stays unresolved; the next
// Lock sends it again.
func TestCoreLockAfterFailedRelease(t *testing.T) {
	model := newModelLock()
	c := newCore(t, model, 30*time.Second)
	granted(t, c.outcome(c.acquire("a", false, nil), "acquire"), "acquire", 1)
	model.mu.Lock()
	model.releaseErrs = []error{errors.New("connection reset"), errors.New("connection reset again")}
	model.mu.Unlock()
	if o := c.outcome(c.release("a", nil), "failed release"); o.Reason != messages.ReasonRedis {
		t.Fatalf("failed release: got %v (err %v), want ReasonRedis", o.Reason, o.Err)
	}
	if o := c.outcome(c.acquire("a", false, nil), "TryLock while the release fails again"); o.Reason != messages.ReasonRedis {
		t.Fatalf("TryLock while the resent release fails: got %v (err %v), want ReasonRedis", o.Reason, o.Err)
	}
	granted(t, c.outcome(c.acquire("a", false, nil), "Lock after the failed release"), "Lock after the failed release", 1)
	model.mu.Lock()
	ids, count := slices.Clone(model.requestIDs), model.count
	model.mu.Unlock()
	if len(ids) != 3 || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Errorf("release request ids %q: want the failed release's id sent again twice", ids)
	}
	if count != 1 {
		t.Errorf("the model counts %d holds of a, want 1 (the release ran, then a hold of its own)", count)
	}
	if o := c.outcome(c.release("a", nil), "release"); o.Reason != messages.ReasonNone || o.HoldCount != 0 {
		t.Fatalf("release: got %v (err %v) count %d, want released", o.Reason, o.Err, o.HoldCount)
	}
	model.mu.Lock()
	holder := model.holder
	model.mu.Unlock()
	if holder != "" {
		t.Errorf("the modelled lock is held by %q after Lock and Unlock, want free", holder)
	}
}

// TestCoreFailedInnerReleaseIsGivenBack: an inner Unlock that fails before it takes effect counts as
// done for the holder, and the last Unlock gives back what Redis still counts, even when releases
// succeeded in between (their answers count the hold the failed one left).
func TestCoreFailedInnerReleaseIsGivenBack(t *testing.T) {
	model := newModelLock()
	c := newCore(t, model, 30*time.Second)
	for i := range 3 {
		granted(t, c.outcome(c.acquire("a", false, nil), "acquire"), "acquire", int64(i+1))
	}
	model.mu.Lock()
	model.releaseErrs = []error{errors.New("connection refused")} // before it reached Redis
	model.mu.Unlock()
	if o := c.outcome(c.release("a", nil), "failed release"); o.Reason != messages.ReasonRedis {
		t.Fatalf("failed release: got %v (err %v), want ReasonRedis", o.Reason, o.Err)
	}
	if o := c.outcome(c.release("a", nil), "second release"); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Fatalf("second release: got %v (err %v) count %d, want 1 hold left", o.Reason, o.Err, o.HoldCount)
	}
	if o := c.outcome(c.release("a", nil), "last release"); o.Reason != messages.ReasonNone || o.HoldCount != 0 {
		t.Fatalf("last release: got %v (err %v) count %d, want none left", o.Reason, o.Err, o.HoldCount)
	}
	model.mu.Lock()
	holder, count := model.holder, model.count
	model.mu.Unlock()
	if holder != "" {
		t.Errorf("after the last Unlock the lock is held by %q with count %d, want free", holder, count)
	}
}

// TestCoreReleaseOfUnknownHold: a release of an owner the actor knows no hold of asks Redis, which
// answers "not held", and the caller is told so; no event goes out.
func TestCoreReleaseOfUnknownHold(t *testing.T) {
	c := newCore(t, newModelLock(), 30*time.Second)
	if o := c.outcome(c.release("ghost", nil), "release"); o.Reason != messages.ReasonNotHeld {
		t.Fatalf("got %v (err %v), want ReasonNotHeld", o.Reason, o.Err)
	}
	if got, want := c.model.callLog(), []string{"release ghost"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if got := c.events.types("ghost"); len(got) != 0 {
		t.Errorf("events %v, want none", got)
	}
}

// TestCoreRefusedAttemptWaitsForNotice: a waiter refused by Redis (another process holds the lock)
// subscribes the lock's channel, tries again once the subscription is confirmed, and then waits for the
// unlock notice, on which it tries again and gets the lock (the fallback retry is a minute away).
func TestCoreRefusedAttemptWaitsForNotice(t *testing.T) {
	model := newModelLock()
	model.take("elsewhere")
	c := newCore(t, model, 30*time.Second)
	tk := c.acquire("a", true, nil)
	select {
	case ch := <-c.subbed:
		if ch != "lock-channel" {
			t.Fatalf("subscribed %q, want lock-channel", ch)
		}
	case <-time.After(c.timeout):
		t.Fatal("the waiter subscribed nothing")
	}
	c.waitCall("acquire a")
	c.waitCall("acquire a") // the try after the confirmation
	if !pending(tk) {
		t.Fatalf("answered while another owner holds the lock: %+v", tk.Outcome())
	}
	model.free()
	c.root.Send(c.pid, &messages.Notice{Channel: "lock-channel", Payload: redisops.UnlockMessage})
	o := c.outcome(tk, "waiter")
	granted(t, o, "waiter", 1)
	if o.Attempts != 3 {
		t.Errorf("attempts %d, want 3 (on arrival, on the confirmation, on the notice)", o.Attempts)
	}
}

// msgContext is the actor.Context of one message handed to Receive by a test: only Message is used
// outside the lifecycle messages.
type msgContext struct {
	actor.Context
	msg any
}

func (c msgContext) Message() any { return c.msg }

// TestCoreStashKeepsOrder: while a call is in flight, the messages that come in wait in the stash and
// are handled in the order they came once it is settled: an acquisition of another owner then finds
// the lock held without asking Redis, and the release that came after it releases the hold the call
// obtained. The actor is driven by hand, message by message, with its own messages (the answers of
// its calls) caught by a stand-in for its PID.
func TestCoreStashKeepsOrder(t *testing.T) {
	model := newModelLock()
	model.asyncCalls = true
	gate := make(chan struct{})
	model.gate, model.started = gate, make(chan string, 8)
	a, inbox := newHandDriven(t, familyPlain, nil)
	a.proto = model
	var closeGate sync.Once
	t.Cleanup(func() { closeGate.Do(func() { close(gate) }) })
	// receive hands msg to the actor, on a goroutine of its own so that an actor that waits for a
	// held call fails the test rather than hanging it.
	receive := func(msg any) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.Receive(msgContext{msg: msg})
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the actor blocked handling %T while a call was in flight", msg)
		}
	}
	fromCall := func() {
		t.Helper()
		select {
		case m := <-inbox:
			receive(m)
		case <-time.After(10 * time.Second):
			t.Fatal("the call in flight did not answer within 10s")
		}
	}

	var mu sync.Mutex
	var order []string
	outcomes := map[string]Outcome{}
	note := func(what string) *Ticket {
		return NewTicketFunc(func(o Outcome) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, what)
			outcomes[what] = o
		})
	}
	answered := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(order) }
	cmd := func(owner string, what string) *Acquire {
		return &Acquire{Name: a.name, Kind: KindPlain, Owner: owner, Lease: time.Minute, Ticket: note(what)}
	}
	acqA, acqB := cmd("a", "acquire a"), cmd("b", "acquire b")
	rel := &Release{Name: a.name, Kind: KindPlain, Owner: "a", Ticket: note("release a")}

	receive(acqA)
	select {
	case <-model.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the acquisition made no call")
	}
	receive(acqB)
	receive(rel)
	if got := answered(); len(got) != 0 {
		t.Fatalf("answered %q while the call was in flight, want nothing", got)
	}
	if got := model.callLog(); !slices.Equal(got, []string{"acquire a"}) {
		t.Fatalf("calls while the first was in flight: %q, want only it", got)
	}
	closeGate.Do(func() { close(gate) })
	fromCall() // settles a's acquisition, then replays b's and the release, which makes a call
	fromCall() // settles the release
	mu.Lock()
	defer mu.Unlock()
	if o := outcomes["acquire a"]; o.Reason != messages.ReasonNone || o.HoldCount != 1 {
		t.Errorf("a: got %v count %d, want held", o.Reason, o.HoldCount)
	}
	if o := outcomes["acquire b"]; o.Reason != messages.ReasonNotObtained {
		t.Errorf("b: got %v, want ReasonNotObtained (a held the lock when b was handled)", o.Reason)
	}
	if o, ok := outcomes["release a"]; !ok || o.Reason != messages.ReasonNone {
		t.Errorf("release: got %v (answered %v), want released", o.Reason, ok)
	}
	if want := []string{"acquire a", "acquire b", "release a"}; !slices.Equal(order, want) {
		t.Errorf("answered in the order %q, want %q", order, want)
	}
	if got, want := model.callLog(), []string{"acquire a", "release a"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// TestCoreExpiryWhenRenewalsFail: a watchdog hold whose renewals all fail (Redis errors, not "not
// held") is kept while its validity lasts, renewed again and again, and lost when the validity runs
// out: Done closes, well before the lease would have let another owner in, and a Lost event goes out.
func TestCoreExpiryWhenRenewalsFail(t *testing.T) {
	const watchdog = 900 * time.Millisecond
	model := newModelLock()
	model.renewErr = errors.New("connection refused")
	c := newCore(t, model, watchdog)
	tk := NewTicket()
	start := time.Now()
	c.root.Send(c.pid, &Acquire{Name: c.name, Kind: KindPlain, Owner: "a", Lease: watchdog, Watchdog: true, Ticket: tk})
	o := c.outcome(tk, "acquire")
	granted(t, o, "acquire", 1)
	select {
	case <-o.Done:
	case <-time.After(c.timeout):
		t.Fatalf("Done did not close within %v although every renewal failed", c.timeout)
	}
	if held := time.Since(start); held > watchdog {
		t.Errorf("Done closed after %v, want within the lease %v", held, watchdog)
	}
	c.waitCall("renew a")
	select {
	case owner := <-c.events.lost:
		if owner != "a" {
			t.Errorf("Lost event of %q, want a", owner)
		}
	case <-time.After(c.timeout):
		t.Fatalf("events %v, want a Lost event", c.events.types("a"))
	}
}

// TestCoreCallPanicFailsTheCall: a panic on the goroutine of a call that the actor does not wait for
// (a solo call) does not end the process: the caller gets ErrActorFailed, and the lock serves the next
// commands.
func TestCoreCallPanicFailsTheCall(t *testing.T) {
	model := newModelLock()
	model.asyncCalls = true
	c := newCore(t, model, 30*time.Second)
	model.panicNext.Store(true)
	if o := c.outcome(c.acquire("a", false, nil), "a, whose call panicked"); !errors.Is(o.Err, ErrActorFailed) {
		t.Fatalf("a: got reason %v err %v, want ErrActorFailed", o.Reason, o.Err)
	}
	granted(t, c.outcome(c.acquire("a", false, nil), "a again"), "a again", 1)
	if o := c.outcome(c.release("a", nil), "release"); o.Reason != messages.ReasonNone {
		t.Fatalf("release: %v %v", o.Reason, o.Err)
	}
}

// newBatchPanicActor returns a read-write lock actor, outside an actor system, whose read batches
// panic on their goroutine (they run on Ops with no client), and the channel its calls' answers
// (batchDone) come to.
func newBatchPanicActor(t *testing.T) (*lockActor, chan batchDone) {
	return newHandDriven(t, familyRW, &redisops.Ops{})
}

// newHandDriven returns a lock actor of family f on ops, outside an actor system, to be driven by
// hand message by message, and the channel to which its own messages (the answers of its calls,
// batchDone) come, caught by a stand-in for its PID.
func newHandDriven(t *testing.T, f family, ops *redisops.Ops) (*lockActor, chan batchDone) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(system.Shutdown)
	inbox := make(chan batchDone, 8)
	self := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(batchDone); ok {
			inbox <- m
		}
	}))
	env := &Env{
		WatchdogTimeout: 30 * time.Second, IdleTimeout: time.Minute, StopReleaseTimeout: time.Second,
		Context: context.Background(), Logger: slog.New(slog.DiscardHandler),
		NewRequestID: func() string { return "req" }, Held: &HeldKinds{}, NewBackOff: DefaultBackOff,
		Ops: ops,
	}
	a := newLockActor(t.Name(), t.Name(), f, env)
	a.root, a.self = system.Root, self
	return a, inbox
}

// TestCoreReadBatchPanicFailsItsCalls: a read batch whose pipeline panics on its goroutine answers all
// the same, and each of its calls fails with ErrActorFailed.
func TestCoreReadBatchPanicFailsItsCalls(t *testing.T) {
	a, inbox := newBatchPanicActor(t)
	var tickets []*Ticket
	for _, owner := range []string{"a", "b"} {
		tk := NewTicket()
		tickets = append(tickets, tk)
		m := &Acquire{Name: a.name, Kind: KindRead, Owner: owner, Lease: time.Minute, Ticket: tk}
		a.batchAcquire(m, func(bool, time.Duration, error) { t.Errorf("%s settled as if Redis had answered", owner) })
	}
	a.send()
	select {
	case m := <-inbox:
		a.handle(msgContext{msg: m}, m)
	case <-time.After(10 * time.Second):
		t.Fatal("the batch did not answer within 10s")
	}
	for i, tk := range tickets {
		select {
		case o := <-tk.Result():
			if !errors.Is(o.Err, ErrActorFailed) {
				t.Errorf("call %d: got reason %v err %v, want ErrActorFailed", i, o.Reason, o.Err)
			}
		default:
			t.Errorf("call %d unanswered", i)
		}
	}
	if a.batching() {
		t.Error("a batch is still pending or running")
	}
}

// TestCoreQueuedReadersLeaveOnBatchPanic: queued readers whose batch panicked are answered and leave
// the queue, rather than being tried again and again.
func TestCoreQueuedReadersLeaveOnBatchPanic(t *testing.T) {
	a, _ := newBatchPanicActor(t)
	var tickets []*Ticket
	for _, owner := range []string{"a", "b"} {
		tk := NewTicket()
		tickets = append(tickets, tk)
		m := &Acquire{Name: a.name, Kind: KindRead, Owner: owner, Lease: time.Minute, Wait: true, Ticket: tk}
		m.queued = true
		a.queue = append(a.queue, m)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.attemptReads(slices.Clone(a.queue))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the readers' attempt did not end within 10s")
	}
	if len(a.queue) != 0 {
		t.Errorf("%d readers still queued, want none", len(a.queue))
	}
	for i, tk := range tickets {
		select {
		case o := <-tk.Result():
			if !errors.Is(o.Err, ErrActorFailed) {
				t.Errorf("reader %d: got reason %v err %v, want ErrActorFailed", i, o.Reason, o.Err)
			}
		default:
			t.Errorf("reader %d unanswered", i)
		}
	}
}

// TestFencedReleaseAfterLatch: a Mutex's release that hands the lock to nobody is sent with its hold's
// token, to be checked by the token counter rather than by the owner's latch, unless the release of a
// Mutex's hold of the name went through the latch less than the latch's life ago (a handoff, here):
// then it goes through the latch too, so that a late copy of that release keeps finding a higher
// sequence there. A release through the latch of a hold the actor message API took (whose owner's
// releases always go through the latch) changes nothing for the others.
func TestFencedReleaseAfterLatch(t *testing.T) {
	model := newModelLock()
	c := newCore(t, model, time.Minute)
	lockEarly := func(owner string, wait bool) *Ticket {
		tk := NewTicket()
		c.root.Send(c.pid, &Acquire{Name: c.name, Kind: KindPlain, Owner: owner, Lease: time.Minute, Wait: wait, Started: time.Now(), AcceptEarlyGrant: true, Ticket: tk})
		return tk
	}
	ok := func(tk *Ticket, what string) {
		t.Helper()
		if o := c.outcome(tk, what); o.Reason != messages.ReasonNone {
			t.Fatalf("%s = %+v", what, o)
		}
	}
	lastToken := func() int64 {
		model.mu.Lock()
		defer model.mu.Unlock()
		return model.releaseTokens[len(model.releaseTokens)-1]
	}

	ok(lockEarly("a", false), "lock a")
	ok(c.release("a", nil), "unlock a")
	if got := lastToken(); got != model.token {
		t.Fatalf("a Mutex's release with no latch in use was sent with token %d, want the hold's %d", got, model.token)
	}
	// A hold that the actor message API took (no early grant) is released through its latch.
	ok(c.acquire("b", false, nil), "lock b")
	ok(c.release("b", nil), "unlock b")
	if got := lastToken(); got != 0 {
		t.Fatalf("the release of a hold taken without early grant was sent with token %d, want 0", got)
	}
	ok(lockEarly("a", false), "lock a again")
	ok(c.release("a", nil), "unlock a again")
	if got := lastToken(); got == 0 {
		t.Fatal("a Mutex's release after another owner's release through its latch was sent through the latch")
	}
	// A Mutex's release that hands the lock off goes through the latch; the next release follows.
	ok(lockEarly("a", false), "lock a a third time")
	waiter := lockEarly("w", true)
	ok(c.release("a", nil), "unlock a, handing off to w")
	ok(waiter, "w's lock")
	ok(c.release("w", nil), "unlock w")
	if got := lastToken(); got != 0 {
		t.Errorf("a Mutex's release right after a handoff through the latch was sent with token %d, want 0 (through the latch)", got)
	}
}

// TestCoreStopAbandonsCallInFlight: a lock actor that stops while its release is still in flight (a
// Redis call blocked on a stalled connection, which go-redis does not end when its context is
// cancelled) waits for it only until the stop deadline (Env.StopReleaseTimeout here), and its caller is
// told that the coordinator closed.
func TestCoreStopAbandonsCallInFlight(t *testing.T) {
	model := newModelLock()
	model.asyncCalls = true
	c := newCore(t, model, time.Minute)
	granted(t, c.outcome(c.acquire("a", false, nil), "acquire a"), "acquire a", 1)
	gate := make(chan struct{})
	var closeGate sync.Once
	t.Cleanup(func() { closeGate.Do(func() { close(gate) }) })
	model.mu.Lock()
	model.gate, model.started = gate, make(chan string, 8)
	model.mu.Unlock()
	rel := c.release("a", nil)
	select {
	case <-model.started:
	case <-time.After(c.timeout):
		t.Fatal("the release did not reach the model")
	}
	model.mu.Lock()
	model.gate = nil // only the release in flight stays blocked; the release at stop answers
	model.mu.Unlock()

	stopped := make(chan struct{})
	start := time.Now()
	go func() { _ = c.root.StopFuture(c.pid).Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(c.timeout):
		t.Fatalf("the lock actor did not stop within %v with its release in flight", c.timeout)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the lock actor took %v to stop, want about the stop release timeout (1s)", took)
	}
	if o := c.outcome(rel, "release in flight at stop"); o.Reason != messages.ReasonClosed {
		t.Fatalf("release in flight at stop: reason %v err %v, want ReasonClosed", o.Reason, o.Err)
	}
	closeGate.Do(func() { close(gate) }) // the call ends; its answer reaches nobody
}
