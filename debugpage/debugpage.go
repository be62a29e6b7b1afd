// Package debugpage serves a page for operators that shows what a lockwarden coordinator holds and
// waits for, its lock events as they happen, and what Redis stores under any name, like
// net/http/pprof does for profiles. [Handler] returns an http.Handler to mount in an application's
// mux:
//
//	mux.Handle("/debug/lockwarden/", http.StripPrefix("/debug/lockwarden", debugpage.Handler(c)))
//
// The handler routes on the last element of the request's path, and the page uses relative URLs, so
// it works mounted with http.StripPrefix or without it, at any path. It serves, under its root:
//
//	GET /                      the HTML page (self-contained: inline CSS and JavaScript, no external resources)
//	GET state.json             this coordinator's holds and waiters, from [coordinator.Coordinator.Local] ([State])
//	GET inspect.json?name=N    what Redis stores under N, from [coordinator.Coordinator.Inspect] ([coordinator.Inspection])
//	GET list.json?pattern=P    the names matching P, from [coordinator.Coordinator.List] ([List])
//	GET processes.json         the registered lockwarden processes ([Processes])
//	GET events.json            the recent lock events the handler keeps ([Events])
//	GET events                 the recent events, then the new ones as they happen: server-sent events (text/event-stream)
//
// The events stream sends each event as a server-sent event with the event's [Event.Seq] as its id
// and its JSON as data. A client that reconnects with Last-Event-ID (as EventSource does), or asks for
// events?after=N, gets only the events after that one.
//
// The page polls state.json twice a second and follows the events stream; it also has a form for
// inspect.json, one for list.json and the table of processes.json. Nothing on the page or behind it
// changes anything in Redis, but it shows every lock name and owner, and reads any key's lock state:
// mount it where only operators reach it.
//
// Errors are JSON objects {"error": "..."}: 400 for a request with a missing name, 404 for an unknown
// path, 405 for a method other than GET, 502 when Redis fails or does not answer within
// [RedisTimeout], 503 once the coordinator is closed or the handler stopped ([WithContext]).
//
// The handler subscribes to the coordinator's events when it is created ([coordinator.Coordinator.Subscribe]),
// keeps the last ones ([WithHistory]) so that a page opened later shows what happened before, and
// hands each event to every client of the events stream. Every client has a buffer of its own
// ([WithClientBuffer]): a client that does not keep up loses events, and is told how many (a
// "dropped" event), but never holds up the other clients, the handler or the coordinator; a client that
// takes no data for 10 seconds is disconnected. Since the handler is subscribed from its creation, the
// coordinator hands it every lock event, page open or not (events cost nothing only while nobody
// listens). The handler stops, ending its subscription and every stream, when the coordinator closes, or when the context
// given with [WithContext] ends. An events stream is a request that lasts: http.Server.Shutdown waits
// for it, so close the coordinator (or end the [WithContext] context) before, or as, the server shuts
// down.
package debugpage

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
)

// RedisTimeout bounds the Redis calls of one request (inspect.json, list.json, processes.json).
const RedisTimeout = 10 * time.Second

// Defaults of the options.
const (
	// DefaultHistory is how many recent events the handler keeps, by default.
	DefaultHistory = 200
	// DefaultClientBuffer is the buffer of events of each events stream client, by default.
	DefaultClientBuffer = 256
)

// subscriptionBuffer is the buffer of the handler's subscription to the coordinator's events.
const subscriptionBuffer = 1024

// ErrNilCoordinator is the error of a handler created with a nil coordinator: it answers every
// request with status 500 and this error.
var ErrNilCoordinator = errors.New("lockwarden: debug page: nil coordinator")

// errStopped is the error of a handler that stopped while its coordinator still runs.
var errStopped = errors.New("lockwarden: debug page stopped")

//go:embed page.html
var pageHTML []byte

// Option configures [Handler].
type Option func(*options)

type options struct {
	history      int
	clientBuffer int
	ctx          context.Context
}

// WithHistory sets how many recent events the handler keeps for the page and its new clients; n <= 0
// keeps [DefaultHistory].
func WithHistory(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.history = n
		}
	}
}

// WithClientBuffer sets how many events each client of the events stream may have waiting to be
// written before the handler drops new ones for it; n <= 0 keeps [DefaultClientBuffer].
func WithClientBuffer(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.clientBuffer = n
		}
	}
}

// WithContext stops the handler when ctx ends: it ends its subscription and its event streams, and
// answers 503 from then on. Without it, the handler stops when the coordinator closes. A nil ctx is
// ignored.
func WithContext(ctx context.Context) Option {
	return func(o *options) {
		if ctx != nil {
			o.ctx = ctx
		}
	}
}

// Handler returns the debug page of c; see the package documentation for what it serves. It
// subscribes to c's events at once, and starts one goroutine, which ends when c closes or the
// [WithContext] context ends. A nil c gives a handler that answers every request with status 500
// and [ErrNilCoordinator].
func Handler(c *coordinator.Coordinator, opts ...Option) http.Handler {
	if c == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusInternalServerError, ErrNilCoordinator)
		})
	}
	o := options{history: DefaultHistory, clientBuffer: DefaultClientBuffer, ctx: context.Background()}
	for _, opt := range opts {
		opt(&o)
	}
	h := &handler{c: c}
	h.hub = newHub(c.Subscribe(nil, subscriptionBuffer), o.history, o.clientBuffer)
	go h.hub.run(o.ctx)
	return h
}

type handler struct {
	c   *coordinator.Coordinator
	hub *hub
}

// ServeHTTP routes on the last element of the path.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	var serve func(http.ResponseWriter, *http.Request)
	switch p := r.URL.Path; {
	case p == "" && !strings.HasSuffix(requestPath(r), "/"):
		// Mounted with http.StripPrefix, asked for the root without its slash: the page's relative URLs
		// need the slash.
		redirectToDir(w, r)
		return
	case p == "" || strings.HasSuffix(p, "/"):
		serve = h.servePage
	default:
		switch path.Base(p) {
		case "state.json":
			serve = h.serveState
		case "inspect.json":
			serve = h.serveInspect
		case "list.json":
			serve = h.serveList
		case "processes.json":
			serve = h.serveProcesses
		case "events.json":
			serve = h.serveEventsJSON
		case "events":
			serve = h.serveEvents
		default:
			writeError(w, http.StatusNotFound, fmt.Errorf("no such page: %q", p))
			return
		}
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed: only GET", r.Method))
		return
	}
	if err := h.closed(); err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	serve(w, r)
}

// closed returns the error to answer with once the coordinator is closed or the handler stopped,
// and nil before.
func (h *handler) closed() error {
	// Processes with no ids makes no Redis call: it only checks that the coordinator is open.
	if _, err := h.c.Processes(context.Background()); errors.Is(err, coordinator.ErrClosed) {
		return err
	}
	if h.hub.isStopped() {
		return errStopped
	}
	return nil
}

// requestPath returns the path the client asked for, before any http.StripPrefix; "/" when unknown.
func requestPath(r *http.Request) string {
	orig := r.RequestURI
	if i := strings.IndexAny(orig, "?#"); i >= 0 {
		orig = orig[:i]
	}
	if orig == "" {
		return "/"
	}
	return orig
}

// redirectToDir redirects a request for the root without its trailing slash to the root with it.
func redirectToDir(w http.ResponseWriter, r *http.Request) {
	target := path.Base(requestPath(r)) + "/"
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusMovedPermanently)
}

func (h *handler) servePage(w http.ResponseWriter, _ *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Security-Policy",
		"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'")
	_, _ = w.Write(pageHTML)
}

// State is what state.json serves: what the owners of this coordinator hold and wait for, from
// [coordinator.Coordinator.Local] (no Redis call).
type State struct {
	// Coordinator is the coordinator's id ([coordinator.Coordinator.ID]).
	Coordinator string `json:"coordinator"`
	// Time is when the state was read, by the clock of the coordinator's process.
	Time time.Time `json:"time"`
	// Holds are the holds, sorted by name and owner.
	Holds []Hold `json:"holds"`
	// Waiters are the owners waiting for a lock, sorted by name and owner.
	Waiters []Waiting `json:"waiters"`
	// EventsDropped counts the events the handler's subscription missed because it fell behind
	// ([coordinator.Subscription.Dropped]): the page's history lacks them.
	EventsDropped uint64 `json:"events_dropped"`
}

// Hold is what one owner holds on one lock name.
type Hold struct {
	// Name is the lock name.
	Name string `json:"name"`
	// Owner is the owner id ([coordinator.Mutex.Owner]).
	Owner string `json:"owner"`
	// Kinds are the kinds held: "plain", "fair", "read", "write" ([messages.Kind.String]).
	Kinds []string `json:"kinds"`
	// Since is when the owner's first hold of these kinds was granted.
	Since time.Time `json:"since"`
	// For is how long ago Since was, at [State.Time].
	For time.Duration `json:"for_ns"`
}

// Waiting is what one owner waits for on one lock name.
type Waiting struct {
	// Name is the lock name.
	Name string `json:"name"`
	// Owner is the owner id of the waiter.
	Owner string `json:"owner"`
	// Kinds counts the owner's acquisitions of each kind that wait or are under way.
	Kinds map[string]int `json:"kinds"`
	// Since is when the first of them was asked for.
	Since time.Time `json:"since"`
	// For is how long ago Since was, at [State.Time].
	For time.Duration `json:"for_ns"`
}

func (h *handler) serveState(w http.ResponseWriter, _ *http.Request) {
	local := h.c.Local()
	if len(local) == 0 {
		// Local returns nothing after Close: tell that from an idle coordinator.
		if err := h.closed(); err != nil {
			writeError(w, http.StatusServiceUnavailable, err)
			return
		}
	}
	now := time.Now()
	st := State{Coordinator: h.c.ID(), Time: now, Holds: []Hold{}, Waiters: []Waiting{}, EventsDropped: h.hub.sub.Dropped()}
	for _, lo := range local {
		if len(lo.Held) > 0 {
			kinds := make([]string, len(lo.Held))
			for i, k := range lo.Held {
				kinds[i] = k.String()
			}
			st.Holds = append(st.Holds, Hold{Name: lo.Name, Owner: lo.Owner, Kinds: kinds, Since: lo.HeldSince, For: since(now, lo.HeldSince)})
		}
		if len(lo.Waiting) > 0 {
			kinds := make(map[string]int, len(lo.Waiting))
			for k, n := range lo.Waiting {
				kinds[k.String()] += n
			}
			st.Waiters = append(st.Waiters, Waiting{Name: lo.Name, Owner: lo.Owner, Kinds: kinds, Since: lo.WaitingSince, For: since(now, lo.WaitingSince)})
		}
	}
	writeJSON(w, http.StatusOK, st)
}

// since returns now - t, or 0 for a zero t or one after now.
func since(now, t time.Time) time.Duration {
	if t.IsZero() || t.After(now) {
		return 0
	}
	return now.Sub(t)
}

func (h *handler) serveInspect(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name == "" {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: give one with ?name=", coordinator.ErrEmptyName))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), RedisTimeout)
	defer cancel()
	in, err := h.c.Inspect(ctx, name)
	if err != nil {
		writeRedisError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}

// List is what list.json serves.
type List struct {
	// Pattern is the pattern asked for ("" is every name).
	Pattern string `json:"pattern"`
	// Names are the names found, sorted ([coordinator.Coordinator.List]).
	Names []string `json:"names"`
	// Truncated is set when more names match than [coordinator.DefaultListLimit].
	Truncated bool `json:"truncated"`
}

func (h *handler) serveList(w http.ResponseWriter, r *http.Request) {
	pattern := r.URL.Query().Get("pattern")
	ctx, cancel := context.WithTimeout(r.Context(), RedisTimeout)
	defer cancel()
	names, err := h.c.List(ctx, pattern)
	truncated := errors.Is(err, coordinator.ErrListTruncated)
	if err != nil && !truncated {
		writeRedisError(w, err)
		return
	}
	if names == nil {
		names = []string{}
	}
	writeJSON(w, http.StatusOK, List{Pattern: pattern, Names: names, Truncated: truncated})
}

// Processes is what processes.json serves.
type Processes struct {
	// Coordinator is this coordinator's id.
	Coordinator string `json:"coordinator"`
	// Processes are the registered lockwarden processes, sorted by coordinator id
	// ([coordinator.Coordinator.RegisteredProcesses]).
	Processes []coordinator.Process `json:"processes"`
}

func (h *handler) serveProcesses(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), RedisTimeout)
	defer cancel()
	procs, err := h.c.RegisteredProcesses(ctx)
	if err != nil {
		writeRedisError(w, err)
		return
	}
	if procs == nil {
		procs = []coordinator.Process{}
	}
	writeJSON(w, http.StatusOK, Processes{Coordinator: h.c.ID(), Processes: procs})
}

// Event is a lock event ([messages.Event]) as events.json and the events stream serve it: its fields
// as [messages.EventJSON] writes them, and its number.
type Event struct {
	// Seq numbers the events the handler received, from 1; the events stream gives it as the id of
	// each event, so that a client that reconnects (with Last-Event-ID) gets only newer ones.
	Seq uint64 `json:"seq"`
	// EventJSON is the event.
	messages.EventJSON
}

func eventOf(seq uint64, ev messages.Event) Event {
	return Event{Seq: seq, EventJSON: ev.JSON()}
}

// Events is what events.json serves.
type Events struct {
	// Events are the recent events the handler keeps ([WithHistory]), oldest first.
	Events []Event `json:"events"`
}

func (h *handler) serveEventsJSON(w http.ResponseWriter, _ *http.Request) {
	recs, _, ok := h.hub.history(0, false)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, errStopped)
		return
	}
	out := Events{Events: make([]Event, len(recs))}
	for i, rec := range recs {
		out.Events[i] = rec.event
	}
	writeJSON(w, http.StatusOK, out)
}

// writeRedisError answers err of a coordinator call: 503 once the coordinator is closed, 400 for an
// empty name, 502 for the rest (Redis failed or did not answer in time).
func writeRedisError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, coordinator.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, err)
	case errors.Is(err, coordinator.ErrEmptyName):
		writeError(w, http.StatusBadRequest, err)
	default:
		writeError(w, http.StatusBadGateway, err)
	}
}

// errorBody is the JSON body of an error answer.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error": "encoding the answer failed"}`)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
