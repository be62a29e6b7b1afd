package debugpage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// mount is where the tests mount the handler, with http.StripPrefix.
const mount = "/debug/lockwarden"

// page is a handler under test: its coordinator, and an httptest server with the handler mounted at
// mount.
type page struct {
	srv    *redistest.Server
	client *redis.Client
	c      *coordinator.Coordinator
	h      *handler
	ts     *httptest.Server
	base   string // URL of the handler's root, with its trailing slash
}

// newPage starts a redis-server, a coordinator on it and the handler, all stopped at cleanup.
func newPage(t *testing.T, opts ...Option) *page {
	t.Helper()
	srv := redistest.Start(t)
	client := srv.Client(t)
	return newPageOn(t, srv, client, opts...)
}

func newPageOn(t *testing.T, srv *redistest.Server, client *redis.Client, opts ...Option) *page {
	t.Helper()
	c, err := coordinator.New(client, coordinator.WithStopReleaseTimeout(time.Second))
	if err != nil {
		t.Fatalf("coordinator.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	h := Handler(c, opts...)
	mux := http.NewServeMux()
	mux.Handle(mount+"/", http.StripPrefix(mount, h))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return &page{srv: srv, client: client, c: c, h: h.(*handler), ts: ts, base: ts.URL + mount + "/"}
}

// name returns a lock name unique to the test.
func name(t *testing.T, suffix string) string {
	return fmt.Sprintf("debugpage:%s:%d:%s", t.Name(), time.Now().UnixNano(), suffix)
}

// get fetches the handler's path rel and returns the status and body.
func get(t *testing.T, p *page, rel string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(p.base + rel)
	if err != nil {
		t.Fatalf("GET %s: %v", rel, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", rel, err)
	}
	return resp.StatusCode, body
}

// getJSON fetches rel, checks its status and decodes its JSON body into v.
func getJSON(t *testing.T, p *page, rel string, status int, v any) {
	t.Helper()
	code, body := get(t, p, rel)
	if code != status {
		t.Fatalf("GET %s: status %d, want %d: %s", rel, code, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", rel, err, body)
	}
}

// wantError checks that rel answers status with a JSON error containing want.
func wantError(t *testing.T, p *page, method, rel string, status int, want string) {
	t.Helper()
	req, err := http.NewRequest(method, p.base+rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rel, err)
	}
	defer resp.Body.Close()
	var e errorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("%s %s: status %d, body not a JSON error: %v", method, rel, resp.StatusCode, err)
	}
	if resp.StatusCode != status || !strings.Contains(e.Error, want) {
		t.Fatalf("%s %s: status %d %q, want %d with %q", method, rel, resp.StatusCode, e.Error, status, want)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: Content-Type %q", method, rel, ct)
	}
}

// waitState polls state.json until ok accepts it, and fails the test after within.
func waitState(t *testing.T, p *page, within time.Duration, what string, ok func(State) bool) State {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var st State
		getJSON(t, p, "state.json", http.StatusOK, &st)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("state.json did not show %s within %v: %+v", what, within, st)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval
	}
}

func mustLock(t *testing.T, m *coordinator.Mutex) {
	t.Helper()
	if err := m.Lock(t.Context()); err != nil {
		t.Fatalf("Lock(%s): %v", m.Name(), err)
	}
}

func mustUnlock(t *testing.T, m *coordinator.Mutex) {
	t.Helper()
	if err := m.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock(%s): %v", m.Name(), err)
	}
}

func TestStateJSON(t *testing.T) {
	p := newPage(t)
	var st State
	getJSON(t, p, "state.json", http.StatusOK, &st)
	if st.Coordinator != p.c.ID() || st.Holds == nil || st.Waiters == nil || len(st.Holds)+len(st.Waiters) != 0 {
		t.Fatalf("state of an idle coordinator: %+v", st)
	}

	lock := name(t, "plain")
	holder := p.c.Mutex(lock)
	mustLock(t, holder)
	before := time.Now()
	getJSON(t, p, "state.json", http.StatusOK, &st)
	if len(st.Holds) != 1 || len(st.Waiters) != 0 {
		t.Fatalf("state with one hold: %+v", st)
	}
	h := st.Holds[0]
	if h.Name != lock || h.Owner != holder.Owner() || !slices.Equal(h.Kinds, []string{"plain"}) ||
		h.Since.IsZero() || h.Since.After(before) || h.For <= 0 {
		t.Fatalf("hold = %+v, want %s held by %s as plain since before %v", h, lock, holder.Owner(), before)
	}

	// A second owner waits for it.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	waiter := p.c.Mutex(lock)
	errc := make(chan error, 1)
	go func() { errc <- waiter.Lock(ctx) }()
	st = waitState(t, p, 5*time.Second, "the waiter", func(st State) bool { return len(st.Waiters) == 1 })
	w := st.Waiters[0]
	if w.Name != lock || w.Owner != waiter.Owner() || w.Kinds["plain"] != 1 || len(w.Kinds) != 1 || w.Since.IsZero() {
		t.Fatalf("waiter = %+v, want %s waited for by %s", w, lock, waiter.Owner())
	}

	// The holder unlocks: the waiter gets it.
	mustUnlock(t, holder)
	if err := <-errc; err != nil {
		t.Fatalf("waiter's Lock: %v", err)
	}
	getJSON(t, p, "state.json", http.StatusOK, &st)
	if len(st.Holds) != 1 || st.Holds[0].Owner != waiter.Owner() || len(st.Waiters) != 0 {
		t.Fatalf("state after the hand-over: %+v", st)
	}

	// A read-write lock's reader, and a fair lock.
	rw := p.c.RWMutex(name(t, "rw"))
	if err := rw.RLock(t.Context()); err != nil {
		t.Fatal(err)
	}
	fair := p.c.FairMutex(name(t, "fair"))
	mustLock(t, fair)
	getJSON(t, p, "state.json", http.StatusOK, &st)
	kinds := map[string][]string{}
	for _, h := range st.Holds {
		kinds[h.Name] = h.Kinds
	}
	if !slices.Equal(kinds[rw.Name()], []string{"read"}) || !slices.Equal(kinds[fair.Name()], []string{"fair"}) {
		t.Fatalf("kinds held: %v", kinds)
	}
}

func TestInspectJSON(t *testing.T) {
	p := newPage(t)
	waitRegistered(t, p)
	lock := name(t, "a b/c?d&e=f") // needs escaping in the query
	m := p.c.Mutex(lock)
	mustLock(t, m)
	var in coordinator.Inspection
	getJSON(t, p, "inspect.json?name="+url.QueryEscape(lock), http.StatusOK, &in)
	if in.Name != lock || in.Kind != coordinator.ObjectLock || len(in.Holders) != 1 || in.Lease <= 0 {
		t.Fatalf("inspection = %+v", in)
	}
	h := in.Holders[0]
	if h.Owner != m.Owner() || h.Count != 1 || h.Process == nil || h.Process.ID != p.c.ID() || h.Process.PID != os.Getpid() {
		t.Fatalf("holder = %+v (process %+v), want %s of this process", h, h.Process, m.Owner())
	}

	// A free name is inspected as nothing.
	in = coordinator.Inspection{}
	getJSON(t, p, "inspect.json?name="+url.QueryEscape(name(t, "free")), http.StatusOK, &in)
	if in.Kind != coordinator.ObjectNone || len(in.Holders) != 0 {
		t.Fatalf("inspection of a free name = %+v", in)
	}
}

func TestListJSON(t *testing.T) {
	p := newPage(t)
	prefix := name(t, "")
	var want []string
	for _, n := range []string{"c", "a", "b"} {
		m := p.c.Mutex(prefix + n)
		mustLock(t, m)
		want = append(want, prefix+n)
	}
	slices.Sort(want)
	var l List
	getJSON(t, p, "list.json?pattern="+url.QueryEscape(prefix+"*"), http.StatusOK, &l)
	if l.Pattern != prefix+"*" || !slices.Equal(l.Names, want) || l.Truncated {
		t.Fatalf("list = %+v, want %v", l, want)
	}
	getJSON(t, p, "list.json?pattern="+url.QueryEscape(prefix+"nothing*"), http.StatusOK, &l)
	if l.Names == nil || len(l.Names) != 0 {
		t.Fatalf("list matching nothing = %+v, want an empty list", l)
	}
	// No pattern lists every name.
	getJSON(t, p, "list.json", http.StatusOK, &l)
	if l.Pattern != "" || len(l.Names) < 3 {
		t.Fatalf("list of everything = %+v", l)
	}
}

func TestProcessesJSON(t *testing.T) {
	p := newPage(t)
	pr := waitRegistered(t, p)
	if pr.PID != os.Getpid() || pr.Version != coordinator.Version {
		t.Fatalf("this process = %+v, want pid %d", pr, os.Getpid())
	}
}

// waitRegistered waits until processes.json lists the coordinator, which registers itself from a
// goroutine of its own once it started, and returns its entry.
func waitRegistered(t *testing.T, p *page) coordinator.Process {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ps Processes
		getJSON(t, p, "processes.json", http.StatusOK, &ps)
		if ps.Coordinator != p.c.ID() {
			t.Fatalf("processes.json coordinator = %q, want %q", ps.Coordinator, p.c.ID())
		}
		if i := slices.IndexFunc(ps.Processes, func(pr coordinator.Process) bool { return pr.ID == p.c.ID() }); i >= 0 {
			return ps.Processes[i]
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes = %+v, want this coordinator (%s) registered", ps.Processes, p.c.ID())
		}
		time.Sleep(5 * time.Millisecond) // a poll interval
	}
}

func TestEventsJSONKeepsTheLastEvents(t *testing.T) {
	p := newPage(t, WithHistory(3))
	m := p.c.Mutex(name(t, "lock"))
	for range 3 {
		mustLock(t, m)
		mustUnlock(t, m)
	}
	// Six events: the last three are kept, oldest first. The released event is published as
	// Unlock returns, so wait for it.
	var evs Events
	deadline := time.Now().Add(5 * time.Second)
	for {
		getJSON(t, p, "events.json", http.StatusOK, &evs)
		if n := len(evs.Events); n > 0 && evs.Events[n-1].Seq == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events.json = %+v, want 6 events seen", evs)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval
	}
	var got []string
	for _, ev := range evs.Events {
		got = append(got, fmt.Sprintf("%d %s %s", ev.Seq, ev.Type, ev.Owner))
	}
	want := []string{"4 released " + m.Owner(), "5 acquired " + m.Owner(), "6 released " + m.Owner()}
	if !slices.Equal(got, want) {
		t.Fatalf("events kept = %q, want %q", got, want)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	id, event, data string
}

// stream is a client of the events stream, read on a goroutine of its own.
type stream struct {
	// epoch is the handler's, which every event id starts with.
	epoch  string
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
	done   chan struct{}
}

// openStream opens the events stream with the headers hdr and reads it until it ends or the test
// does.
func openStream(t *testing.T, p *page, rel string, hdr http.Header) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	maps := hdr.Clone()
	if maps != nil {
		req.Header = maps
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", rel, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: status %d, Content-Type %q", rel, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &stream{epoch: p.h.hub.epoch, resp: resp, events: make(chan sseEvent, 100000), cancel: cancel, done: make(chan struct{})}
	go s.read()
	t.Cleanup(s.close)
	return s
}

func (s *stream) read() {
	defer close(s.done)
	defer close(s.events)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.data != "" {
				s.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			ev.event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		}
	}
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// next returns the next lock event of the stream, skipping other server-sent events, and fails the
// test when none comes within the time or the stream ends.
func (s *stream) next(t *testing.T, within time.Duration) Event {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case sev, ok := <-s.events:
			if !ok {
				t.Fatalf("the events stream ended")
			}
			if sev.event != "" {
				continue
			}
			var ev Event
			if err := json.Unmarshal([]byte(sev.data), &ev); err != nil {
				t.Fatalf("event %q: %v", sev.data, err)
			}
			if sev.id != s.epoch+"."+fmt.Sprint(ev.Seq) {
				t.Fatalf("event id %q, seq %d, want the epoch %q and the seq", sev.id, ev.Seq, s.epoch)
			}
			return ev
		case <-timer.C:
			t.Fatalf("no event within %v", within)
		}
	}
}

// waitEvent reads events until one of type typ on lock name, and returns it.
func (s *stream) waitEvent(t *testing.T, within time.Duration, typ, name string) Event {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ev := s.next(t, time.Until(deadline))
		if ev.Type == typ && ev.Name == name {
			return ev
		}
	}
}

func TestEventStream(t *testing.T) {
	p := newPage(t)
	s := openStream(t, p, "events", nil)
	lock := name(t, "lock")
	m := p.c.Mutex(lock)
	mustLock(t, m)
	ev := s.waitEvent(t, 5*time.Second, "acquired", lock)
	if ev.Owner != m.Owner() || ev.Kind != "plain" || ev.Token == 0 || ev.HoldCount != 1 || ev.Coordinator != p.c.ID() {
		t.Fatalf("acquired event = %+v", ev)
	}
	mustUnlock(t, m)
	ev = s.waitEvent(t, 5*time.Second, "released", lock)
	if ev.Owner != m.Owner() || ev.HoldCount != 0 || ev.Reason != "unlocked" || ev.Held <= 0 {
		t.Fatalf("released event = %+v", ev)
	}
}

func TestEventStreamHistory(t *testing.T) {
	p := newPage(t)
	lock := name(t, "lock")
	m := p.c.Mutex(lock)
	mustLock(t, m)
	mustUnlock(t, m)
	// A client that connects afterwards gets the history first.
	s := openStream(t, p, "events", nil)
	acquired := s.next(t, 5*time.Second)
	released := s.next(t, 5*time.Second)
	if acquired.Type != "acquired" || released.Type != "released" || acquired.Name != lock || released.Name != lock ||
		released.Seq != acquired.Seq+1 {
		t.Fatalf("history = %+v, %+v", acquired, released)
	}
	// Then the new events.
	mustLock(t, m)
	if ev := s.next(t, 5*time.Second); ev.Type != "acquired" || ev.Seq != released.Seq+1 {
		t.Fatalf("event after the history = %+v", ev)
	}

	// A client that reconnects with Last-Event-ID (as EventSource does) gets only what it missed;
	// ?after= does the same for a new connection.
	for _, c := range []struct {
		rel string
		hdr http.Header
	}{
		{"events", http.Header{"Last-Event-ID": {fmt.Sprintf("%s.%d", p.h.hub.epoch, acquired.Seq)}}},
		{fmt.Sprintf("events?after=%s.%d", p.h.hub.epoch, acquired.Seq), nil},
	} {
		s2 := openStream(t, p, c.rel, c.hdr)
		if ev := s2.next(t, 5*time.Second); ev.Seq != released.Seq || ev.Type != "released" {
			t.Fatalf("%s %v: first event = %+v, want the released one (%d)", c.rel, c.hdr, ev, released.Seq)
		}
		s2.close()
	}
	// An id of another handler (an earlier run of the program) resumes from the first event kept.
	s3 := openStream(t, p, "events", http.Header{"Last-Event-ID": {fmt.Sprintf("0badc0de.%d", released.Seq)}})
	if ev := s3.next(t, 5*time.Second); ev.Seq != acquired.Seq {
		t.Fatalf("an id of another epoch: first event = %+v, want the first kept (%d)", ev, acquired.Seq)
	}
	s3.close()
}

// blockedWriter is an events stream client that takes no data: its Write blocks until release is
// closed. It records what it is given.
type blockedWriter struct {
	hdr     http.Header
	release chan struct{}
	writing chan struct{} // closed at the first Write
	once    sync.Once
	mu      sync.Mutex
	body    strings.Builder
}

func (w *blockedWriter) Header() http.Header { return w.hdr }
func (w *blockedWriter) WriteHeader(int)     {}
func (w *blockedWriter) Flush()              {}
func (w *blockedWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.writing) })
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(b)
}

func TestSlowClientDoesNotBlockOthers(t *testing.T) {
	p := newPage(t)
	// The slow client is stuck in its first Write.
	slow := &blockedWriter{hdr: http.Header{}, release: make(chan struct{}), writing: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(slow.release) }) }
	t.Cleanup(release) // should the test fail before it releases the client
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/events", nil)
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		p.h.ServeHTTP(slow, req)
	}()
	select {
	case <-slow.writing:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow client's stream did not start")
	}
	fast := openStream(t, p, "events", nil)

	// 400 lock cycles: 800 events, far more than a client's buffer.
	lock := name(t, "lock")
	m := p.c.Mutex(lock)
	const cycles = 400
	for range cycles {
		mustLock(t, m)
		mustUnlock(t, m)
	}
	// The fast client gets every one of them, in order.
	for i := range 2 * cycles {
		ev := fast.next(t, 5*time.Second)
		want := "acquired"
		if i%2 == 1 {
			want = "released"
		}
		if ev.Type != want || ev.Seq != uint64(i+1) {
			t.Fatalf("fast client's event %d = %s #%d, want %s #%d", i, ev.Type, ev.Seq, want, i+1)
		}
	}
	if got := p.h.hub.sub.Dropped(); got != 0 {
		t.Fatalf("the handler's subscription dropped %d events", got)
	}

	// The slow client kept the first DefaultClientBuffer events and lost the rest; when it takes data
	// again, the next event comes after a notice of how many it lost.
	epoch := p.h.hub.epoch
	waitFor := func(id int) {
		t.Helper()
		want := fmt.Sprintf("id: %s.%d\n", epoch, id)
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(slow.text(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the slow client did not get event %d; it got:\n%s", id, slow.text())
			}
			time.Sleep(5 * time.Millisecond) // a poll interval
		}
	}
	release()
	// The kept events are written first; the next event is made only once they are, since one that
	// came while the client's buffer was still full would be dropped too.
	waitFor(DefaultClientBuffer)
	mustLock(t, m)
	next := fmt.Sprintf("id: %s.%d\n", epoch, 2*cycles+1)
	waitFor(2*cycles + 1)
	text := slow.text()
	var ids []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "id: ") {
			ids = append(ids, line[len("id: "):])
		}
	}
	lost := 2*cycles - DefaultClientBuffer
	notice := fmt.Sprintf("event: dropped\ndata: {\"dropped\": %d}\n\n%s", lost, next)
	if len(ids) != DefaultClientBuffer+1 || ids[0] != epoch+".1" || ids[DefaultClientBuffer-1] != fmt.Sprintf("%s.%d", epoch, DefaultClientBuffer) ||
		!strings.Contains(text, notice) {
		t.Fatalf("the slow client got events %v, want 1 to %d then %d after a notice of %d lost:\n%s",
			ids, DefaultClientBuffer, 2*cycles+1, lost, text)
	}
	cancel()
	select {
	case <-slowDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow client's stream did not end with its request")
	}
}

func (w *blockedWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.String()
}

func TestEventStreamEndsWithItsRequest(t *testing.T) {
	p := newPage(t)
	s := openStream(t, p, "events", nil)
	s2 := openStream(t, p, "events", nil)
	waitClients(t, p, 2)
	s.close()
	waitClients(t, p, 1)
	s2.close()
	waitClients(t, p, 0)
}

// waitClients waits until the handler has n events stream clients.
func waitClients(t *testing.T, p *page, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.h.hub.clientCount() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d events stream clients, want %d", p.h.hub.clientCount(), n)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval
	}
}

func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	// A client that fails at once when Redis is down.
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	p := newPageOn(t, srv, client)
	wantError(t, p, http.MethodGet, "inspect.json", http.StatusBadRequest, "empty lock name")
	wantError(t, p, http.MethodGet, "inspect.json?name=", http.StatusBadRequest, "empty lock name")
	wantError(t, p, http.MethodGet, "nothing.json", http.StatusNotFound, "no such page")
	wantError(t, p, http.MethodGet, "state.json/more", http.StatusNotFound, "no such page")
	for _, rel := range []string{"", "state.json", "inspect.json?name=x", "list.json", "processes.json", "events.json", "events"} {
		wantError(t, p, http.MethodPost, rel, http.StatusMethodNotAllowed, "only GET")
		wantError(t, p, http.MethodDelete, rel, http.StatusMethodNotAllowed, "only GET")
	}
	req, _ := http.NewRequest(http.MethodPut, p.base+"state.json", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Allow") != http.MethodGet {
		t.Fatalf("405 Allow = %q", resp.Header.Get("Allow"))
	}

	// Redis fails: 502 with its error. The page itself and state.json need no Redis.
	p.srv.Kill()
	for _, rel := range []string{"inspect.json?name=x", "list.json", "processes.json"} {
		wantError(t, p, http.MethodGet, rel, http.StatusBadGateway, "connect")
	}
	var st State
	getJSON(t, p, "state.json", http.StatusOK, &st)
	if code, _ := get(t, p, ""); code != http.StatusOK {
		t.Fatalf("GET / with Redis down: %d", code)
	}
}

func TestNilCoordinator(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/state.json", nil))
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusInternalServerError ||
		e.Error != ErrNilCoordinator.Error() {
		t.Fatalf("nil coordinator: %d %s", rec.Code, rec.Body)
	}
}

func TestPage(t *testing.T) {
	p := newPage(t)
	resp, err := http.Get(p.base)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	html := string(body)
	// Relative URLs only, and nothing from elsewhere.
	for _, want := range []string{`getJSON("state.json")`, `new EventSource("events"`, `"inspect.json?name="`, `"list.json?pattern="`, `getJSON("processes.json")`} {
		if !strings.Contains(html, want) {
			t.Errorf("the page does not contain %s", want)
		}
	}
	for _, bad := range []string{"http://", "https://", `src="`, `"/state.json"`, `"/events"`, "@import", "url("} {
		if strings.Contains(html, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
}

// TestMounting serves the handler with http.StripPrefix and without it, at a sub-path.
func TestMounting(t *testing.T) {
	srv := redistest.Start(t)
	p := newPageOn(t, srv, srv.Client(t))
	mux := http.NewServeMux()
	mux.Handle("/admin/locks/", p.h) // not stripped
	mux.Handle("/", http.StripPrefix("/", p.h))
	ts := httptest.NewServer(mux)
	defer ts.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		path   string
		status int
		ctype  string
	}{
		{"/admin/locks/", http.StatusOK, "text/html"},
		{"/admin/locks/state.json", http.StatusOK, "application/json"},
		{"/admin/locks/inspect.json?name=x", http.StatusOK, "application/json"},
		{"/admin/locks/nope", http.StatusNotFound, "application/json"},
		{"/", http.StatusOK, "text/html"},
		{"/state.json", http.StatusOK, "application/json"},
		{"/admin/locks", http.StatusTemporaryRedirect, ""}, // the mux adds the slash
	} {
		resp, err := noRedirect.Get(ts.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.status, c.ctype)
		}
	}
	// Stripped down to nothing (the prefix without its slash): redirected to the root with its slash,
	// which the page's relative URLs need.
	rec := httptest.NewRecorder()
	http.StripPrefix("/debug/lockwarden", p.h).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/lockwarden?x=1", nil))
	if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "lockwarden/?x=1" {
		t.Fatalf("the root without its slash: %d, Location %q", rec.Code, rec.Header().Get("Location"))
	}
}

// TestClosed closes the coordinator under a page with a stream open: the stream ends, every path
// answers 503, and no goroutine is left behind.
func TestClosed(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	leaks := goleak.IgnoreCurrent()
	c, err := coordinator.New(client, coordinator.WithStopReleaseTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(c)
	ts := httptest.NewServer(http.StripPrefix(mount, h))
	transport := &http.Transport{}
	p := &page{srv: srv, client: client, c: c, h: h.(*handler), ts: ts, base: ts.URL + mount + "/"}
	m := c.Mutex(name(t, "lock"))
	mustLock(t, m)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"events", nil)
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ended <- err
	}()

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the events stream ended with %v, want its end", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the events stream did not end when the coordinator closed")
	}
	for _, rel := range []string{"", "state.json", "inspect.json?name=x", "list.json", "processes.json", "events.json", "events"} {
		wantError(t, p, http.MethodGet, rel, http.StatusServiceUnavailable, "coordinator closed")
	}
	ts.Close()
	transport.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, leaks)
}

// TestStoppedByContext stops the handler with its context while the coordinator runs on.
func TestStoppedByContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := newPage(t, WithContext(ctx))
	s := openStream(t, p, "events", nil)
	cancel()
	select {
	case <-p.h.hub.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler did not stop with its context")
	}
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the events stream did not end when the handler stopped")
	}
	wantError(t, p, http.MethodGet, "state.json", http.StatusServiceUnavailable, "debug page stopped")
	wantError(t, p, http.MethodGet, "events", http.StatusServiceUnavailable, "debug page stopped")
	// The coordinator is not closed: its locks still work.
	m := p.c.Mutex(name(t, "lock"))
	mustLock(t, m)
	mustUnlock(t, m)
	if !errors.Is(p.h.closed(), errStopped) {
		t.Fatalf("closed() = %v", p.h.closed())
	}
}

// TestDeployments: the page's data on a Sentinel deployment and on a Cluster: a lock held shows in
// state.json, inspect.json shows its holder and process, list.json finds it.
func TestDeployments(t *testing.T) {
	for _, d := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"sentinel", func(t *testing.T) redis.UniversalClient {
			rs := redistest.StartReplicaSet(t, 2)
			return redistest.StartSentinels(t, rs, 1).FailoverClient(t)
		}},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t, 3).Client(t) }},
	} {
		t.Run(d.name, func(t *testing.T) {
			c, err := coordinator.New(d.client(t), coordinator.WithStopReleaseTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			ts := httptest.NewServer(Handler(c))
			t.Cleanup(ts.Close)
			fetch := func(rel string, v any) {
				t.Helper()
				resp, err := http.Get(ts.URL + "/" + rel)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					body, _ := io.ReadAll(resp.Body)
					t.Fatalf("GET %s: %d %s", rel, resp.StatusCode, body)
				}
				if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
					t.Fatalf("GET %s: %v", rel, err)
				}
			}
			lock := name(t, "orders")
			m := c.Mutex(lock)
			mustLock(t, m)
			var st State
			fetch("state.json", &st)
			if len(st.Holds) != 1 || st.Holds[0].Name != lock || st.Holds[0].Owner != m.Owner() {
				t.Fatalf("state.json holds = %+v, want %s held by %s", st.Holds, lock, m.Owner())
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				var in coordinator.Inspection
				fetch("inspect.json?name="+url.QueryEscape(lock), &in)
				if len(in.Holders) != 1 || in.Holders[0].Owner != m.Owner() {
					t.Fatalf("inspect.json = %+v", in)
				}
				if p := in.Holders[0].Process; p != nil && p.ID == c.ID() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("inspect.json: the holder's process was not registered within 5s")
				}
				<-time.After(10 * time.Millisecond)
			}
			var list List
			fetch("list.json?pattern="+url.QueryEscape(lock), &list)
			if len(list.Names) != 1 || list.Names[0] != lock {
				t.Fatalf("list.json = %+v, want [%s]", list, lock)
			}
			mustUnlock(t, m)
		})
	}
}
