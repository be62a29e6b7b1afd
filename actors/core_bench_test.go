package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// instantLock is a strategy for the reentrant lock whose calls answer at once, as a Redis that costs
// nothing would: every acquisition is granted with count 1, every release frees the lock, every
// renewal succeeds. It keeps no model and records nothing, so that a benchmark measures the lock actor
// alone.
type instantLock struct {
	plainStrategy
	tokens atomic.Int64
}

func (p *instantLock) acquire(context.Context, *Acquire, int64, bool) (redisops.Acquired, error) {
	return redisops.Acquired{OK: true, HoldCount: 1, Token: p.tokens.Add(1)}, nil
}

func (p *instantLock) release(context.Context, holdKey, string, time.Duration, *redisops.Handoff) (redisops.Released, error) {
	return redisops.Released{}, nil
}

func (p *instantLock) releaseHeld(context.Context, holdKey, string, time.Duration, int64, int64, *redisops.Handoff) (redisops.Released, error) {
	return redisops.Released{}, nil
}

func (p *instantLock) renew(context.Context, holdKey, time.Duration) error { return nil }

func (p *instantLock) renewMany(_ context.Context, ks []holdKey, _ time.Duration) []error {
	return make([]error, len(ks))
}

func (p *instantLock) holdCount(context.Context, holdKey) (int64, error) { return 1, nil }

func (p *instantLock) channel(*Acquire) string { return "bench-channel" }

// discardEvents is an event sink that drops every event (the coordinator's also feeds the metrics).
type discardEvents struct{}

func (discardEvents) Publish(messages.Event) {}

// BenchmarkCorePair measures what the lock actor itself costs per uncontended Lock+Unlock, without
// Redis: the time, allocations and bytes per pair, on one goroutine, of an Acquire with the watchdog
// and a Release, posted to an idle actor on the coordinator's inline mailbox the way Coordinator.ask
// posts them for a caller whose context cannot end: the carry is open around the post, and the
// caller runs the Redis call (here instantLock's) itself. It reports uncarried/op, the share of
// commands whose answer the caller had to wait for on its ticket's channel because the actor did not
// hand it the call; it fails when that is more than one in a thousand, since the benchmark would then
// measure another path. It is the share of BenchmarkLockCost's client CPU per pair that does not
// depend on Redis or go-redis. Run it with go test -run '^$' -bench BenchmarkCorePair ./actors/.
func BenchmarkCorePair(b *testing.B) {
	const watchdog = 30 * time.Second // a watchdog hold's lease: the first renewal is 10 s away
	c := &core{t: b, name: "bench:core-pair"}
	startCore(b, c, &instantLock{}, discardEvents{}, watchdog, true)
	var asked, uncarried int
	ask := func(msg any, tk *Ticket) Outcome {
		asked++
		tk.OpenCarry()
		c.root.Send(c.pid, msg)
		if run := tk.CloseCarry(); run != nil {
			run()
		}
		if !tk.Delivered() {
			uncarried++
			select {
			case <-tk.Ready():
			case <-time.After(c.timeout):
				b.Fatalf("no answer within %v", c.timeout)
			}
		}
		return tk.Outcome()
	}
	// The command and its ticket in one allocation each, as the coordinator makes them.
	type acquireCall struct {
		cmd    Acquire
		ticket Ticket
	}
	type releaseCall struct {
		cmd    Release
		ticket Ticket
	}
	b.ReportAllocs()
	for b.Loop() {
		acq := new(acquireCall)
		acq.cmd = Acquire{Name: c.name, Kind: KindPlain, Owner: "owner", Lease: watchdog, Watchdog: true,
			AcceptEarlyGrant: true, Started: time.Now(), Ticket: acq.ticket.Init()}
		if o := ask(&acq.cmd, acq.cmd.Ticket); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
			b.Fatalf("acquire: reason %v err %v count %d", o.Reason, o.Err, o.HoldCount)
		}
		rel := new(releaseCall)
		rel.cmd = Release{Name: c.name, Kind: KindPlain, Owner: "owner", Ticket: rel.ticket.Init()}
		if o := ask(&rel.cmd, rel.cmd.Ticket); o.Reason != messages.ReasonNone {
			b.Fatalf("release: reason %v err %v", o.Reason, o.Err)
		}
	}
	b.ReportMetric(float64(uncarried)/float64(asked), "uncarried/op")
	if uncarried*1000 > asked {
		b.Fatalf("%d of %d commands were not carried by their caller", uncarried, asked)
	}
}
