package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/actors"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/redisops"
)

// Sizes of the event buffers.
const (
	// DefaultSubscriptionBuffer is the buffer of a Subscription created with size 0.
	DefaultSubscriptionBuffer = 256
	// eventQueue is the queue between the lock actors and the event hub's goroutine.
	eventQueue = 4096
	// journalQueue is the queue between the hub and the journal writer.
	journalQueue = 4096
	// streamQueue is the queue between the hub and the goroutine that publishes on the actor system's
	// EventStream.
	streamQueue = 4096
	// journalBatch is the most events one journal pipeline carries.
	journalBatch = 256
)

// WithEventJournal makes the coordinator append every lock event to the Redis Stream stream (XADD, on
// the coordinator's client, in batches from a goroutine of its own), trimmed to about maxLen entries
// (MAXLEN ~; 0 keeps everything), so that other processes can consume the events with XREAD or a
// consumer group ([ReadJournal], [ParseJournalEntry]). stream must not be empty and maxLen not
// negative. By default there is no journal. Events the journal cannot write (its queue of 4096 is full,
// or Redis fails) are dropped and counted ([Coordinator.JournalDropped]).
func WithEventJournal(stream string, maxLen int64) Option {
	return func(o *options) error {
		if stream == "" || maxLen < 0 {
			return fmt.Errorf("%w: event journal %q with max length %d", ErrInvalidOption, stream, maxLen)
		}
		o.journalStream, o.journalMaxLen = stream, maxLen
		return nil
	}
}

// EventFilter selects the events a Subscription receives; nil selects every event. It is called for
// every event on the goroutine that hands the events to every consumer, so it must be quick and must
// not block: a filter that blocks holds up every subscriber, the EventStream and the journal.
type EventFilter func(messages.Event) bool

// ForLock selects the events of the lock name.
func ForLock(name string) EventFilter {
	return func(ev messages.Event) bool { return ev.Name == name }
}

// OfType selects the events of the given types.
func OfType(types ...messages.EventType) EventFilter {
	return func(ev messages.Event) bool { return slices.Contains(types, ev.Type) }
}

// Subscription is a live stream of the lock events of one coordinator. Events arrive in the order they
// happened for each lock. A subscriber that falls behind never slows the locks down, nor takes events
// from other subscribers, the EventStream or the journal: when its buffer is full, new events are
// dropped for it alone and counted ([Subscription.Dropped]).
type Subscription struct {
	hub     *eventHub
	filter  EventFilter
	ch      chan messages.Event
	dropped atomic.Uint64
	// mu orders the hub's sends with closing the channel.
	mu     sync.Mutex
	closed bool
}

// Subscribe returns a subscription to the coordinator's lock events that filter selects (nil: all),
// with a buffer of size events (0: [DefaultSubscriptionBuffer]). Close it when done; the coordinator's
// Close closes it too. On a closed coordinator it returns a subscription whose channel is closed.
func (c *Coordinator) Subscribe(filter EventFilter, size int) *Subscription {
	if size <= 0 {
		size = DefaultSubscriptionBuffer
	}
	s := &Subscription{hub: c.events, filter: filter, ch: make(chan messages.Event, size)}
	if !c.events.add(s) {
		close(s.ch)
	}
	return s
}

// Events returns the channel of events. It is closed by [Subscription.Close] and when the coordinator
// closes.
func (s *Subscription) Events() <-chan messages.Event { return s.ch }

// Dropped returns how many events were dropped for this subscriber because its buffer was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription and closes its channel. It is idempotent.
func (s *Subscription) Close() {
	s.hub.remove(s)
	s.closeChannel()
}

func (s *Subscription) closeChannel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
}

// deliver hands ev to the subscriber without blocking, or counts it as dropped.
func (s *Subscription) deliver(ev messages.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.ch <- ev:
	default:
		s.dropped.Add(1)
	}
}

// DroppedEvents returns how many events the coordinator could not hand to its event hub because the
// hub's queue (4096 events) was full: every subscriber, the EventStream and the journal miss them. The
// hub waits for none of its consumers (each has a queue and a count of its own: [Subscription.Dropped],
// [Coordinator.EventStreamDropped], [Coordinator.JournalDropped]), so this stays 0 unless the hub's
// goroutine itself cannot keep up with the locks.
func (c *Coordinator) DroppedEvents() uint64 { return c.events.dropped.Load() }

// EventStreamDropped returns how many events the actor system's EventStream missed because its
// listeners fell behind: protoactor runs an EventStream's handlers one after the other on the
// publishing goroutine, so the coordinator publishes there from a goroutine of its own, with a queue of
// 4096 events, and counts the events that find the queue full (and those still queued when Close's
// stop release timeout runs out: a handler that blocks holds up Close no longer than that, though
// the goroutine stays until the handler returns). A slow handler delays the other handlers of the
// same EventStream and makes them miss these events too (that is how protoactor's EventStream
// works); it takes nothing from [Coordinator.Subscribe]'s subscribers or from the journal. For a
// stream of one's own, use Subscribe.
func (c *Coordinator) EventStreamDropped() uint64 { return c.events.stream.dropped.Load() }

// eventHub takes the lock actors' events without blocking them and fans them out, on its own
// goroutine, to the subscriptions, to the actor system's EventStream and to the journal. It never
// waits on any of them: each has its own bounded queue and drop count.
type eventHub struct {
	in      chan messages.Event
	dropped atomic.Uint64

	// mu guards closed against Publish; subsMu guards the subscription list, which the hub's goroutine
	// reads as an immutable snapshot.
	mu     sync.RWMutex
	closed bool
	subsMu sync.Mutex
	subs   atomic.Pointer[[]*Subscription]

	// stream forwards the events to the actor system's EventStream, while it has more subscribers
	// than base: protoactor's own in a system of the coordinator's, none in an application's system
	// (whose subscriptions from before New cannot be told from protoactor's).
	stream *streamForwarder
	base   int32

	journal *eventJournal
	done    chan struct{}
}

// newEventHub starts a hub that publishes on stream while it has more than base subscribers.
func newEventHub(stream *eventstream.EventStream, base int32, journal *eventJournal, stop *actors.StopClock) *eventHub {
	h := &eventHub{
		in: make(chan messages.Event, eventQueue), stream: newStreamForwarder(stream, stop), base: base, journal: journal,
		done: make(chan struct{}),
	}
	h.subs.Store(&[]*Subscription{})
	go h.run()
	return h
}

// Publish implements actors.EventSink. When nobody listens it drops the event at once, so that events
// cost the locks nothing then.
func (h *eventHub) Publish(ev messages.Event) {
	if len(*h.subs.Load()) == 0 && h.journal == nil && h.stream.stream.Length() <= h.base {
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return
	}
	select {
	case h.in <- ev:
	default:
		h.dropped.Add(1)
	}
}

func (h *eventHub) add(s *Subscription) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return false
	}
	h.subsMu.Lock()
	defer h.subsMu.Unlock()
	subs := append(slices.Clone(*h.subs.Load()), s)
	h.subs.Store(&subs)
	return true
}

// remove takes s out of the list.
func (h *eventHub) remove(s *Subscription) {
	h.subsMu.Lock()
	defer h.subsMu.Unlock()
	old := *h.subs.Load()
	if i := slices.Index(old, s); i >= 0 {
		subs := slices.Delete(slices.Clone(old), i, i+1)
		h.subs.Store(&subs)
	}
}

func (h *eventHub) run() {
	defer close(h.done)
	for ev := range h.in {
		for _, s := range *h.subs.Load() {
			if s.filter != nil && !s.filter(ev) {
				continue
			}
			s.deliver(ev)
		}
		if h.stream.stream.Length() > h.base {
			h.stream.add(ev)
		}
		if h.journal != nil {
			h.journal.add(ev)
		}
	}
}

// close stops the hub once the lock actors have stopped: the events already queued are delivered,
// then every subscription's channel is closed and the journal flushed.
func (h *eventHub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.in)
	h.mu.Unlock()
	<-h.done
	h.subsMu.Lock()
	subs := *h.subs.Load()
	h.subs.Store(&[]*Subscription{})
	h.subsMu.Unlock()
	for _, s := range subs {
		s.closeChannel()
	}
	h.stream.close()
	if h.journal != nil {
		h.journal.close()
	}
}

// streamForwarder publishes events on an EventStream from its own goroutine: EventStream runs its
// handlers on the publishing goroutine, and a slow handler must hold up neither the hub nor a lock
// actor.
type streamForwarder struct {
	stream  *eventstream.EventStream
	stop    *actors.StopClock
	in      chan messages.Event
	dropped atomic.Uint64
	// deadline, once Close started, is when the events still queued stop being published (Unix
	// nanoseconds; 0 before).
	deadline atomic.Int64
	done     chan struct{}
}

func newStreamForwarder(stream *eventstream.EventStream, stop *actors.StopClock) *streamForwarder {
	f := &streamForwarder{stream: stream, stop: stop, in: make(chan messages.Event, streamQueue), done: make(chan struct{})}
	go f.run()
	return f
}

// add queues ev without blocking, or counts it as dropped.
func (f *streamForwarder) add(ev messages.Event) {
	select {
	case f.in <- ev:
	default:
		f.dropped.Add(1)
	}
}

func (f *streamForwarder) run() {
	defer close(f.done)
	for ev := range f.in {
		if d := f.deadline.Load(); d != 0 && time.Now().UnixNano() > d {
			f.dropped.Add(1)
			continue
		}
		f.stream.Publish(ev)
	}
}

// close publishes what is queued, until the stop deadline (the rest is counted as dropped), and stops.
// A handler that blocks past the deadline keeps the forwarder's goroutine until it returns, but not
// close: close then takes what is still queued and counts it as dropped.
func (f *streamForwarder) close() {
	deadline := f.stop.Deadline()
	f.deadline.Store(deadline.UnixNano())
	close(f.in)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-f.done:
	case <-timer.C:
		// run, should its handler return, drops what it still takes: each event is counted once.
		for range f.in {
			f.dropped.Add(1)
		}
	}
}

// eventJournal appends events to a Redis Stream from its own goroutine, in batches, so that a slow
// Redis never holds up the hub.
type eventJournal struct {
	client  redis.Cmdable
	stream  string
	maxLen  int64
	stop    *actors.StopClock
	logger  *slog.Logger
	in      chan messages.Event
	dropped atomic.Uint64
	done    chan struct{}
}

func newEventJournal(client redis.Cmdable, stream string, maxLen int64, stop *actors.StopClock, logger *slog.Logger) *eventJournal {
	j := &eventJournal{
		client: client, stream: stream, maxLen: maxLen, stop: stop, logger: logger,
		in: make(chan messages.Event, journalQueue), done: make(chan struct{}),
	}
	go j.run()
	return j
}

func (j *eventJournal) add(ev messages.Event) {
	select {
	case j.in <- ev:
	default:
		j.dropped.Add(1)
	}
}

func (j *eventJournal) run() {
	defer close(j.done)
	batch := make([]messages.Event, 0, journalBatch)
	for ev := range j.in {
		batch = append(batch[:0], ev)
	more:
		for len(batch) < journalBatch {
			select {
			case ev, ok := <-j.in:
				if !ok {
					break more
				}
				batch = append(batch, ev)
			default:
				break more
			}
		}
		// Each batch is bounded by the stop release timeout, and once Close started by its deadline.
		ctx, cancel := j.stop.Context()
		if err := redisops.AppendEvents(ctx, j.client, j.stream, j.maxLen, batch); err != nil {
			j.dropped.Add(uint64(len(batch)))
			j.logger.Warn("event journal append failed; events dropped", "stream", j.stream, "events", len(batch), "err", err)
		}
		cancel()
	}
}

// close writes what is queued (until the stop deadline) and stops.
func (j *eventJournal) close() {
	close(j.in)
	<-j.done
}

// JournalDropped returns how many events the journal could not write (its queue was full, or Redis
// failed); 0 without a journal.
func (c *Coordinator) JournalDropped() uint64 {
	if c.events.journal == nil {
		return 0
	}
	return c.events.journal.dropped.Load()
}

// JournalEntry is one lock event read back from an event journal.
type JournalEntry = redisops.JournalEntry

// ReadJournal reads up to count lock events from the journal stream written by a coordinator with
// [WithEventJournal], after the entry id after ("0" from the start, "$" only new ones), waiting up to
// block for one when there is none (0: no wait). Pass the last entry's ID as after to read on. It
// returns no entries and a nil error when block passes with nothing new. Consumer groups can read the
// stream with XREADGROUP and decode each entry with [ParseJournalEntry].
func ReadJournal(ctx context.Context, client redis.Cmdable, stream, after string, count int64, block time.Duration) ([]JournalEntry, error) {
	return redisops.ReadEvents(ctx, client, stream, after, count, block)
}

// ParseJournalEntry decodes one entry of an event journal, as XREAD, XRANGE or XREADGROUP return it.
func ParseJournalEntry(msg redis.XMessage) (JournalEntry, error) { return redisops.ParseEvent(msg) }
