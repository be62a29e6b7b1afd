package actors

import (
	"context"
	"sync"
	"time"

	"github.com/lockwarden/lockwarden/redisops"
)

// Renewals sends the watchdog renewals of every lock actor of a coordinator to Redis together, as
// Redisson's renewal scheduler does: the actors hand it the holds due on their watchdog tick and go
// on with their work; it gathers what they hand it for a short window (the linger, a small part of the
// watchdog's tick) and sends all of it with [redisops.Ops.RenewHolds]: up to 100 holds per script
// call, one pipeline (and one WAIT with replica sync on) per master, the masters at the same time and
// each answered on its own. Each actor gets its own answers back as a message. It is safe for
// concurrent use.
type Renewals struct {
	ops    *redisops.Ops
	ctx    context.Context
	linger time.Duration
	// bound caps each flush's time from when it is sent (0: no cap).
	bound time.Duration

	mu      sync.Mutex
	pending []*renewRequest
	running bool
	wg      sync.WaitGroup
}

// renewRequest is one actor's renewals of one watchdog tick: done gets each hold's error, in order.
type renewRequest struct {
	holds    []redisops.Hold
	deadline time.Time
	done     func(errs []error)
}

// NewRenewals returns the collector of renewals on ops. ctx bounds every flush (it ends when the
// coordinator closes); linger is how long a flush waits for more renewals after the first one it
// carries was handed in. Each flush is also bounded by the latest expiry of the holds it renews and
// by bound from when it is sent (0: no such bound): the coordinator's Close waits for a flush, and
// go-redis ends a read blocked on a stalled connection at its context's deadline, not when ctx ends.
func NewRenewals(ops *redisops.Ops, ctx context.Context, linger, bound time.Duration) *Renewals {
	return &Renewals{ops: ops, ctx: ctx, linger: linger, bound: bound}
}

// submit hands req in; its done runs on the collector's goroutine once Redis answered (or failed).
func (r *Renewals) submit(req *renewRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, req)
	if !r.running {
		r.running = true
		r.wg.Add(1)
		go r.loop()
	}
}

// loop flushes what is pending once the linger has passed. A flush does not hold up the next one:
// what is handed in while it is in flight starts a new loop, so that a master that does not answer
// delays only the renewals of its own holds.
func (r *Renewals) loop() {
	defer r.wg.Done()
	if r.linger > 0 {
		t := time.NewTimer(r.linger)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
		}
	}
	r.mu.Lock()
	reqs := r.pending
	r.pending, r.running = nil, false
	r.mu.Unlock()
	r.flush(reqs)
}

// flush renews the holds of reqs, in one RenewHolds per master, the masters at the same time, each
// bounded by the latest deadline of its renewals: an answer later than that counts for none of them.
// Every request's holds are on one lock name, so on one master.
func (r *Renewals) flush(reqs []*renewRequest) {
	byMaster := make(map[string][]*renewRequest)
	for _, req := range reqs {
		m := r.ops.MasterOf(r.ctx, req.holds[0].Name)
		byMaster[m] = append(byMaster[m], req)
	}
	var wg sync.WaitGroup
	for _, group := range byMaster {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.flushGroup(group)
		}()
	}
	wg.Wait()
}

// flushGroup renews the holds of reqs in one RenewHolds and gives each request its answers.
func (r *Renewals) flushGroup(reqs []*renewRequest) {
	var holds []redisops.Hold
	var deadline time.Time
	for _, req := range reqs {
		holds = append(holds, req.holds...)
		if req.deadline.After(deadline) {
			deadline = req.deadline
		}
	}
	if r.bound > 0 {
		if capped := time.Now().Add(r.bound); deadline.IsZero() || capped.Before(deadline) {
			deadline = capped
		}
	}
	ctx, cancel := context.WithDeadline(r.ctx, deadline)
	errs := r.ops.RenewHolds(ctx, holds)
	cancel()
	for _, req := range reqs {
		n := len(req.holds)
		req.done(errs[:n:n])
		errs = errs[n:]
	}
}

// Wait waits until no flush runs; it is for Close, after the actors have stopped.
func (r *Renewals) Wait() { r.wg.Wait() }
