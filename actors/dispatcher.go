package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// WorkerPool is a protoactor dispatcher that runs mailboxes on long-lived goroutines. protoactor's
// default dispatcher starts a new goroutine for every batch of messages; a lock actor then calls into
// go-redis on a fresh, small stack, and growing that stack costs more than the actor itself. A pool
// keeps warm stacks. When every worker is busy, Schedule falls back to a new goroutine, so a slow Redis
// call never delays another lock. Stop ends the workers; it must be called once the actors using the
// pool have stopped.
type WorkerPool struct {
	throughput int
	work       chan func()
	wg         sync.WaitGroup

	mu      sync.RWMutex
	stopped bool
}

var _ actor.Dispatcher = (*WorkerPool)(nil)

// NewWorkerPool starts size workers, each processing up to throughput messages per turn.
func NewWorkerPool(size, throughput int) *WorkerPool {
	p := &WorkerPool{throughput: throughput, work: make(chan func())}
	p.wg.Add(size)
	for range size {
		go func() {
			defer p.wg.Done()
			for fn := range p.work {
				fn()
			}
		}()
	}
	return p
}

// Schedule implements actor.Dispatcher.
func (p *WorkerPool) Schedule(fn func()) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.stopped {
		select {
		case p.work <- fn:
			return
		default:
		}
	}
	go fn()
}

// Throughput implements actor.Dispatcher.
func (p *WorkerPool) Throughput() int { return p.throughput }

// Stop ends the workers after their current work and waits for them. Work scheduled later runs on new
// goroutines. It is idempotent.
func (p *WorkerPool) Stop() { p.StopBy(time.Time{}) }

// StopBy is Stop, waiting for the workers only until deadline (the zero time: no bound). It reports
// whether they all ended. A worker still busy then (a Redis call a lock actor gave up on at its stop
// deadline, blocked on a stalled connection) ends once its work does.
func (p *WorkerPool) StopBy(deadline time.Time) bool {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.work)
	}
	p.mu.Unlock()
	if deadline.IsZero() {
		p.wg.Wait()
		return true
	}
	ended := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(ended)
	}()
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case <-ended:
		return true
	case <-wait.C:
		return false
	}
}
