package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/integration/redistest"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// recordHandler keeps the messages of the error records logged through it.
type recordHandler struct {
	mu     sync.Mutex
	errors []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "actor" || a.Key == "err" {
				b.WriteString(" " + a.Key + "=" + a.Value.String())
			}
			return true
		})
		h.mu.Lock()
		h.errors = append(h.errors, b.String())
		h.mu.Unlock()
	}
	return nil
}

func (h *recordHandler) logged(actor string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.errors {
		if strings.Contains(e, "actor="+actor) {
			return true
		}
	}
	return false
}

// panicOnce returns an inject hook that panics once, on the first message of the actor named actor
// for which match is true, and a channel closed when it has.
func panicOnce(actor string, match func(any) bool) (func(string, any), <-chan struct{}) {
	var fired atomic.Bool
	done := make(chan struct{})
	return func(name string, msg any) {
		if name == actor && match(msg) && fired.CompareAndSwap(false, true) {
			close(done)
			panic("injected failure")
		}
	}, done
}

// failureCoordinator starts a redis-server and a coordinator whose actors run inject before every
// message, logging to h.
func failureCoordinator(t *testing.T, h *recordHandler, inject func(string, any), opts ...Option) (*Coordinator, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	opts = append(opts, WithLogger(slog.New(h)), func(o *options) error { o.inject = inject; return nil })
	c, err := New(srv.Client(t), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, srv
}

// waitEvent waits for an event of type typ on sub.
func waitEvent(t *testing.T, sub *Subscription, typ messages.EventType, within time.Duration) messages.Event {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case ev := <-sub.Events():
			if ev.Type == typ {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %s event within %v", typ, within)
		}
	}
}

// TestLockActorPanicRecovered: a lock actor that panics while it handles a command answers that
// caller with ErrActorFailed, logs the panic, publishes an actor-failed event, and keeps its state:
// the hold it had is still renewed and the lock still works.
func TestLockActorPanicRecovered(t *testing.T) {
	h := &recordHandler{}
	var target atomic.Pointer[string]
	inject, fired := panicOnce("lock actor", func(msg any) bool {
		a, ok := msg.(*actors.Acquire)
		return ok && target.Load() != nil && a.Owner == *target.Load()
	})
	const watchdog = 600 * time.Millisecond
	c, _ := failureCoordinator(t, h, inject, WithWatchdogTimeout(watchdog))
	name := t.Name()
	sub := c.Subscribe(ForLock(name), 1024)
	holder := c.Mutex(name)
	if err := holder.Lock(t.Context()); err != nil {
		t.Fatalf("holder Lock: %v", err)
	}
	other := c.Mutex(name)
	owner := other.Owner()
	target.Store(&owner)
	ok, err := other.TryLock(t.Context())
	if !errors.Is(err, ErrActorFailed) || ok {
		t.Fatalf("TryLock of the command that panicked = %v, %v; want false, ErrActorFailed", ok, err)
	}
	<-fired
	ev := waitEvent(t, sub, messages.EventActorFailed, time.Second)
	if !strings.Contains(ev.Reason, "injected failure") {
		t.Errorf("actor-failed event Reason = %q, want the panic", ev.Reason)
	}
	if !h.logged("lock actor") {
		t.Errorf("the panic was not logged as an error; logged: %q", h.errors)
	}
	// The hold survives: renewed twice more, which takes longer than one lease.
	waitEvent(t, sub, messages.EventRenewed, 2*watchdog)
	waitEvent(t, sub, messages.EventRenewed, 2*watchdog)
	waitEvent(t, sub, messages.EventRenewed, 2*watchdog)
	select {
	case <-holder.Done():
		t.Fatal("the holder's Done closed after the lock actor recovered")
	default:
	}
	if held, err := holder.IsHeld(t.Context()); err != nil || !held {
		t.Fatalf("holder IsHeld after the panic = %v, %v; want true", held, err)
	}
	if err := holder.Unlock(t.Context()); err != nil {
		t.Fatalf("holder Unlock: %v", err)
	}
	if ok, err := other.TryLock(t.Context()); err != nil || !ok {
		t.Fatalf("TryLock after the recovery = %v, %v; want true", ok, err)
	}
	if err := other.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestBridgePanicResubscribes: the pub/sub bridge panics while it subscribes a waiter's channel. It
// recovers, logs and reports the failure, and subscribes every channel it serves again, so the waiter
// is woken by the unlock notice (within milliseconds), not by its fallback timer (a third of the
// watchdog timeout, 10 s here).
func TestBridgePanicResubscribes(t *testing.T) {
	h := &recordHandler{}
	inject, fired := panicOnce("pub/sub bridge", func(msg any) bool {
		_, ok := msg.(*messages.Subscribe)
		return ok
	})
	c, srv := failureCoordinator(t, h, inject)
	// The holder is another process's, so that its unlock reaches the waiter by the notice (a local
	// holder would hand the lock off in its release).
	other, err := New(srv.Client(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = other.Close() })
	name := t.Name()
	sub := c.Subscribe(nil, 1024)
	holder, waiter := other.Mutex(name), c.Mutex(name)
	if err := holder.Lock(t.Context()); err != nil {
		t.Fatalf("holder Lock: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- waiter.Lock(t.Context()) }()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("the bridge was never asked to subscribe")
	}
	waitEvent(t, sub, messages.EventActorFailed, time.Second)
	if !h.logged("pub/sub bridge") {
		t.Errorf("the panic was not logged as an error; logged: %q", h.errors)
	}
	// Unlock once the waiter's channel is subscribed again (go-redis confirms it before the actor
	// retries, so the notice cannot be missed).
	ch := redisops.ChannelName(name)
	admin := srv.Client(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := admin.PubSubNumSub(t.Context(), ch).Result()
		if err != nil {
			t.Fatalf("PUBSUB NUMSUB: %v", err)
		}
		if n[ch] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not subscribed within 5s after the bridge recovered", ch)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := holder.Unlock(t.Context()); err != nil {
		t.Fatalf("holder Unlock: %v", err)
	}
	start := time.Now()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("waiter Lock: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("the waiter was not woken within 3s of the unlock: the bridge lost its subscription")
	}
	t.Logf("waiter woken %v after the unlock", time.Since(start))
	if err := waiter.Unlock(t.Context()); err != nil {
		t.Fatalf("waiter Unlock: %v", err)
	}
}

// TestGatewayPanicAnswersCaller: the gateway panics while it handles a request of the actor message
// API. The requester gets an [messages.Error] matching ErrActorFailed at once rather than waiting for
// its own time-out, and the gateway keeps serving.
func TestGatewayPanicAnswersCaller(t *testing.T) {
	h := &recordHandler{}
	inject, fired := panicOnce("gateway", func(msg any) bool {
		m, ok := msg.(*messages.Acquire)
		return ok && m.Name == t.Name()
	})
	c, _ := failureCoordinator(t, h, inject)
	root := c.ActorSystem().Root
	res, err := root.RequestFuture(c.PID(), &messages.Acquire{Name: t.Name(), Owner: "o"}, 5*time.Second).Result()
	<-fired
	if err != nil {
		t.Fatalf("request whose handling panicked: no reply (%v), want an Error matching ErrActorFailed", err)
	}
	if e, ok := res.(*messages.Error); !ok || !errors.Is(e.Err, ErrActorFailed) {
		t.Fatalf("reply %#v, want an Error matching ErrActorFailed", res)
	}
	if !h.logged("gateway") {
		t.Errorf("the panic was not logged as an error; logged: %q", h.errors)
	}
	res, err = root.RequestFuture(c.PID(), &messages.Acquire{Name: t.Name(), Owner: "o"}, 5*time.Second).Result()
	if _, ok := res.(*messages.Acquired); err != nil || !ok {
		t.Fatalf("request after the recovery: %#v, %v; want Acquired", res, err)
	}
	if _, err := root.RequestFuture(c.PID(), &messages.Release{Name: t.Name(), Owner: "o"}, 5*time.Second).Result(); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
