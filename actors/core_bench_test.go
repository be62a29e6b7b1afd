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
// nothing would: every acquisition is granted with count 1 and every release frees the lock. It keeps
// no model and records nothing, so that a benchmark measures the lock actor alone.
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

// discardEvents is an event sink that drops every event, as the coordinator's does when nobody
// subscribes.
type discardEvents struct{}

func (discardEvents) Publish(messages.Event) {}

// BenchmarkCorePair measures what the lock actor itself costs per uncontended Lock+Unlock, without
// Redis: the CPU time, allocations and bytes of an Acquire and a Release with the watchdog, posted to
// an idle actor on the coordinator's inline mailbox the way Coordinator.ask posts them for a caller
// whose context cannot end (the carry open around the post, and the Redis call, here instantLock's,
// run by the caller). It is the share of BenchmarkLockCost's client CPU per pair that does not depend
// on Redis or go-redis. Run it with go test -run '^$' -bench BenchmarkCorePair ./actors/.
func BenchmarkCorePair(b *testing.B) {
	c := &core{t: b, name: "bench:core-pair"}
	startCore(b, c, &instantLock{}, discardEvents{}, 30*time.Second, true)
	ask := func(msg any, tk *Ticket) Outcome {
		tk.OpenCarry()
		c.root.Send(c.pid, msg)
		if run := tk.CloseCarry(); run != nil {
			run()
		}
		if !tk.Delivered() {
			<-tk.Ready()
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
		acq.cmd = Acquire{Name: c.name, Kind: KindPlain, Owner: "owner", Lease: time.Minute, Watchdog: true,
			Started: time.Now(), Ticket: acq.ticket.Init()}
		if o := ask(&acq.cmd, acq.cmd.Ticket); o.Reason != messages.ReasonNone || o.HoldCount != 1 {
			b.Fatalf("acquire: reason %v err %v count %d", o.Reason, o.Err, o.HoldCount)
		}
		rel := new(releaseCall)
		rel.cmd = Release{Name: c.name, Kind: KindPlain, Owner: "owner", Ticket: rel.ticket.Init()}
		if o := ask(&rel.cmd, rel.cmd.Ticket); o.Reason != messages.ReasonNone || o.Err != nil {
			b.Fatalf("release: reason %v err %v", o.Reason, o.Err)
		}
	}
}
