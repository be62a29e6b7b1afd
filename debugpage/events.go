package debugpage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
)

// Timing of the events stream.
const (
	// pingInterval is how often an idle events stream writes a comment, so that proxies keep the
	// connection and a client that went away is noticed.
	pingInterval = 15 * time.Second
	// writeTimeout bounds each write of an events stream: a client that takes no data for that long
	// is disconnected.
	writeTimeout = 10 * time.Second
	// retryMillis is the reconnection delay the events stream asks EventSource clients for.
	retryMillis = 2000
)

// record is one event the hub received: the event, and its JSON as the events stream sends it.
type record struct {
	event Event
	data  []byte
	// id is the event's id in the stream (see hub.eventID).
	id string
}

// delivery is a record handed to a client, with the number of events dropped for the client just
// before it.
type delivery struct {
	rec     *record
	dropped uint64
}

// client is one events stream.
type client struct {
	ch chan delivery
	// dropped counts the events dropped since the last delivery; guarded by hub.mu.
	dropped uint64
}

// hub receives the coordinator's events on one subscription, keeps the last ones in a ring, and hands
// each one to every client without ever waiting for one.
type hub struct {
	sub    *coordinator.Subscription
	buffer int
	done   chan struct{}

	mu      sync.Mutex
	ring    []*record // the last len(ring) records, oldest at next when the ring is full
	next    int
	full    bool
	seq     uint64
	clients map[*client]struct{}
	stopped bool
	// epoch tells this hub's event ids from another's (a handler of an earlier run of the program): a
	// client that resumes after an id of another epoch gets every event kept.
	epoch string
}

func newHub(sub *coordinator.Subscription, history, buffer int) *hub {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return &hub{sub: sub, buffer: buffer, ring: make([]*record, history), clients: map[*client]struct{}{},
		done: make(chan struct{}), epoch: hex.EncodeToString(b[:])}
}

// run hands the subscription's events out until the coordinator closes or ctx ends, then stops the
// hub: every client's channel is closed and new ones are refused.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	defer h.stop()
	defer h.sub.Close()
	for {
		select {
		case ev, ok := <-h.sub.Events():
			if !ok {
				return
			}
			h.publish(ev)
		case <-ctx.Done():
			return
		}
	}
}

// publish numbers ev, keeps it in the ring and hands it to every client that has room for it.
func (h *hub) publish(ev messages.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	rec := &record{event: eventOf(h.seq, ev), id: h.eventID(h.seq)}
	rec.data, _ = json.Marshal(rec.event)
	h.ring[h.next] = rec
	h.next++
	if h.next == len(h.ring) {
		h.next, h.full = 0, true
	}
	for cl := range h.clients {
		select {
		case cl.ch <- delivery{rec: rec, dropped: cl.dropped}:
			cl.dropped = 0
		default:
			cl.dropped++
		}
	}
}

func (h *hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	for cl := range h.clients {
		close(cl.ch)
	}
	clear(h.clients)
}

func (h *hub) isStopped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stopped
}

// eventID is the id of the event with sequence number seq in the stream: <epoch>.<seq>.
func (h *hub) eventID(seq uint64) string { return h.epoch + "." + strconv.FormatUint(seq, 10) }

// resumeAfter returns the sequence number to resume after, from the id a client last got: 0 (every
// event kept) for no id, an id of another epoch, or one that does not parse.
func (h *hub) resumeAfter(id string) uint64 {
	epoch, seq, ok := strings.Cut(id, ".")
	if !ok || epoch != h.epoch {
		return 0
	}
	n, _ := strconv.ParseUint(seq, 10, 64)
	return n
}

// history returns the records kept with a sequence number above after, oldest first (all of them when
// after is from before the handler, above the last number given), and, when attach is set, a new
// client that gets every later record. ok is false once the hub stopped.
func (h *hub) history(after uint64, attach bool) (recs []*record, cl *client, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, nil, false
	}
	if after > h.seq {
		after = 0
	}
	n := h.next
	if h.full {
		n = len(h.ring)
	}
	for i := range n {
		rec := h.ring[i]
		if h.full {
			rec = h.ring[(h.next+i)%len(h.ring)]
		}
		if rec.event.Seq > after {
			recs = append(recs, rec)
		}
	}
	if attach {
		cl = &client{ch: make(chan delivery, h.buffer)}
		h.clients[cl] = struct{}{}
	}
	return recs, cl, true
}

// detach removes cl from the clients, if the hub has not already.
func (h *hub) detach(cl *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, cl)
}

// clientCount returns the number of events stream clients.
func (h *hub) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// serveEvents serves the events stream: the kept events newer than the Last-Event-ID header, or the
// after parameter without it (all when there is neither), then each new one, until the request's context ends, the client stops taking
// data for writeTimeout, or the hub stops. Each event is a server-sent event with <epoch>.<Seq> as id
// (the epoch is the handler's own, so that an id given by an earlier handler resumes from the start)
// and its JSON ([Event]) as data; events dropped for the client come as an event named "dropped"
// with {"dropped": n}.
func (h *handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Last-Event-ID")
	if id == "" {
		id = r.URL.Query().Get("after")
	}
	recs, cl, ok := h.hub.history(h.hub.resumeAfter(id), true)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, errStopped)
		return
	}
	defer h.hub.detach(cl)

	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	// deadline gives the writes that follow, and their flush, writeTimeout: every write phase sets it
	// first, since a write larger than the response's buffer reaches the connection at once (a stuck
	// client would otherwise block it forever, and an old deadline would cut a healthy one off).
	deadline := func() bool {
		err := rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		return err == nil || errors.Is(err, http.ErrNotSupported)
	}
	// flush sends what was written; false when the client is gone.
	flush := func() bool { return rc.Flush() == nil }
	if !deadline() {
		return
	}
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", retryMillis); err != nil {
		return
	}
	for _, rec := range recs {
		if !writeRecord(w, delivery{rec: rec}) {
			return
		}
	}
	if !flush() {
		return
	}
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if !deadline() {
				return
			}
			if _, err := w.Write([]byte(": ping\n\n")); err != nil || !flush() {
				return
			}
		case d, ok := <-cl.ch:
			if !ok || !deadline() {
				return
			}
			// Write what is waiting, then flush once.
			for more := true; more; {
				if !writeRecord(w, d) {
					return
				}
				select {
				case d, more = <-cl.ch:
				default:
					more = false
				}
			}
			if !flush() {
				return
			}
		}
	}
}

// writeRecord writes d as server-sent events: a "dropped" event first when events were dropped
// before it.
func writeRecord(w http.ResponseWriter, d delivery) bool {
	if d.rec == nil {
		return true
	}
	if d.dropped > 0 {
		if _, err := fmt.Fprintf(w, "event: dropped\ndata: {\"dropped\": %d}\n\n", d.dropped); err != nil {
			return false
		}
	}
	_, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", d.rec.id, d.rec.data)
	return err == nil
}
