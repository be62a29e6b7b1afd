package redistest

import (
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

const (
	// faultType is the toxiproxy toxic type under which faultToxic is
	// registered.
	faultType = "redistest_fault"
	// maxQueued is how many chunks of data (each up to 32 KiB) a connection
	// holds per direction, while stalled or delayed, before the proxy stops
	// reading from it.
	maxQueued = 1024
	// pipesTimeout bounds how long the cleanup registered by NewProxy waits
	// for the proxy's connections to wind down.
	pipesTimeout = 10 * time.Second
)

func init() {
	toxics.Register(faultType, new(faultToxic))
}

// A Proxy is an in-process TCP proxy, built on toxiproxy, that sits between
// clients and an upstream address (typically a [Server]) and injects network
// faults: refused and dropped connections ([Proxy.Disable]), partitions that
// keep connections open but deliver nothing ([Proxy.Stall]) and latency
// ([Proxy.AddLatency]).
//
// Unlike the fault-injection methods of [Server], which act on the
// redis-server process and so affect every client, a Proxy only affects the
// clients that connect through it. Faults can be combined with each other
// and with the Server's own.
//
// Addr may be called from any goroutine. The other methods report failures
// with the testing.TB passed to [NewProxy], so, like t.FailNow, they must be
// called from the goroutine running the test.
//
// Toxiproxy supplies the listener, the upstream connections and the
// per-connection pipelines; the faults are one toxic of this package's on
// each direction, installed before the proxy starts and reconfigured in
// place. Toxiproxy's own "timeout" and "latency" toxics, and adding or
// removing toxics on live connections, are avoided because in toxiproxy
// v2.12.0 they race (updating a toxic) or leave goroutines blocked forever
// (removing a "timeout" toxic, or closing a connection while data is in
// flight), which goleak reports.
type Proxy struct {
	tb   testing.TB
	addr string // fixed for the Proxy's lifetime
	p    *toxiproxy.Proxy
	ctl  *faultCtl

	mu       sync.Mutex // serialises Disable, Enable and the cleanup
	disabled bool
}

// NewProxy starts a TCP proxy on a free port on 127.0.0.1 that forwards
// every connection it accepts to upstream, for example a Server's
// [Server.Addr]. The proxy dials upstream anew for each accepted
// connection; if that fails, it closes the accepted connection, so a client
// of a proxy whose upstream is down sees its connection accepted and then
// closed rather than refused.
//
// NewProxy registers a cleanup with tb that stops the proxy, closes all
// connections through it and waits for their goroutines to finish. It
// calls tb.Fatalf if the proxy cannot listen. Toxiproxy's logging is
// discarded.
func NewProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "redistest", "127.0.0.1:0", upstream)
	ctl := newFaultCtl()
	// Install the fault toxics before Start: no connection exists yet, so
	// setting their ctl races with nothing, and every connection's chain
	// ends with them.
	for _, dir := range []string{"upstream", "downstream"} {
		w, err := p.Toxics.AddToxicJson(strings.NewReader(
			`{"name":"redistest_` + dir + `","type":"` + faultType + `","stream":"` + dir + `","toxicity":1}`))
		if err != nil {
			tb.Fatalf("redistest: NewProxy: adding the %s fault toxic: %v", dir, err)
		}
		w.Toxic.(*faultToxic).ctl = ctl
	}
	if err := p.Start(); err != nil {
		tb.Fatalf("redistest: NewProxy: starting proxy to %s: %v", upstream, err)
	}
	// Start has replaced the :0 in Listen with the port actually bound;
	// Enable listens on the same address again.
	px := &Proxy{tb: tb, addr: p.Listen, p: p, ctl: ctl}
	tb.Cleanup(px.cleanup)
	return px
}

// Addr returns the address the proxy listens on, as "127.0.0.1:port". It
// does not change across [Proxy.Disable] and [Proxy.Enable].
func (px *Proxy) Addr() string {
	return px.addr
}

// Disable stops the proxy: its listener is closed, so new connections are
// refused, and every connection through it is closed, so clients see EOF or
// a reset; data the proxy was holding back is lost. Disabling a disabled
// proxy does nothing. Stall and latency settings are kept and apply again
// after Enable.
func (px *Proxy) Disable() {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.disabled {
		return
	}
	px.p.Stop()
	px.ctl.closeConns()
	px.disabled = true
}

// Enable restarts a proxy stopped by [Proxy.Disable] on the same address.
// Connections closed by Disable stay closed; clients have to reconnect.
// Enabling an enabled proxy does nothing. Enable calls tb.Fatalf if the
// address cannot be bound again (because something else took the port in
// the meantime).
func (px *Proxy) Enable() {
	px.tb.Helper()
	px.mu.Lock()
	defer px.mu.Unlock()
	if !px.disabled {
		return
	}
	if err := px.p.Start(); err != nil {
		px.tb.Fatalf("redistest: Enable: restarting proxy on %s: %v", px.addr, err)
	}
	px.disabled = false
}

// Stall simulates a network partition: connections through the proxy stay
// open, and new ones are accepted (and connected upstream), but no data
// flows in either direction, so clients observe read timeouts rather than
// connection errors. The proxy holds what either side writes meanwhile, up
// to 1024 reads' worth per connection and direction (then it stops reading,
// and TCP flow control pushes back on the writer), and delivers it, in
// order, on [Proxy.Unstall], as TCP delivers data once a partition heals.
// A connection closed by one side during the stall is closed on the other
// side only after Unstall. Stalling a stalled proxy does nothing.
func (px *Proxy) Stall() {
	px.ctl.update(func(c *faultCtl) { c.stalled = true })
}

// Unstall ends a stall started by [Proxy.Stall]. Connections that lived
// through it stay open and first receive whatever the other side wrote
// during it, so a client that gave up on a request during the stall must
// not reuse its connection (go-redis discards a connection after a read
// timeout). Unstalling a proxy that is not stalled does nothing.
func (px *Proxy) Unstall() {
	px.ctl.update(func(c *faultCtl) { c.stalled = false })
}

// AddLatency delays the data flowing through the proxy by d in each
// direction, so a request/response round trip takes at least 2*d longer.
// It applies to existing and new connections, including data already
// waiting in the proxy, and replaces any latency set before. d must be
// positive, or AddLatency calls tb.Fatalf.
func (px *Proxy) AddLatency(d time.Duration) {
	px.tb.Helper()
	if d <= 0 {
		px.tb.Fatalf("redistest: AddLatency: latency must be positive, got %v", d)
	}
	px.ctl.update(func(c *faultCtl) { c.latency = d })
}

// RemoveLatency removes the latency set by [Proxy.AddLatency]; data it was
// holding back is delivered at once. Removing latency from a proxy that has
// none does nothing.
func (px *Proxy) RemoveLatency() {
	px.ctl.update(func(c *faultCtl) { c.latency = 0 })
}

// cleanup stops the proxy and waits until the fault toxics of all its
// connections have returned. By then the connections' other toxiproxy
// goroutines have finished or are about to.
func (px *Proxy) cleanup() {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.p.Stop()
	px.ctl.closeConns()
	px.disabled = true
	done := make(chan struct{})
	go func() {
		px.ctl.pipes.Wait()
		close(done)
	}()
	timer := time.NewTimer(pipesTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		px.tb.Errorf("redistest: proxy on %s: connections still running %v after it stopped", px.addr, pipesTimeout)
	}
}

// faultCtl is the fault configuration of one Proxy, shared by the fault
// toxics of both directions and all connections.
type faultCtl struct {
	mu      sync.Mutex
	stalled bool
	latency time.Duration
	changed chan struct{} // closed, and replaced, when stalled or latency change
	closed  chan struct{} // closed, and replaced, when the proxy closes its connections

	// pipes counts the connection directions whose fault toxic has not
	// finished for good. NewState adds to it, in toxiproxy's accept loop, which
	// toxiproxy's Stop waits for.
	pipes sync.WaitGroup
}

func newFaultCtl() *faultCtl {
	return &faultCtl{changed: make(chan struct{}), closed: make(chan struct{})}
}

// faultConfig is a snapshot of a faultCtl's settings.
type faultConfig struct {
	stalled bool
	latency time.Duration
	changed <-chan struct{}
}

func (c *faultCtl) config() faultConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return faultConfig{stalled: c.stalled, latency: c.latency, changed: c.changed}
}

// update applies f to the settings and wakes the connections up to notice.
func (c *faultCtl) update(f func(*faultCtl)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
	close(c.changed)
	c.changed = make(chan struct{})
}

// connsClosed returns a channel that is closed when the proxy closes the
// connections it has now. Connections accepted later get a new channel.
func (c *faultCtl) connsClosed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// closeConns tells the connections of the current generation that the proxy
// has closed them. It must be called after toxiproxy's Stop, which closes
// the connections and guarantees that no more are accepted until Start.
func (c *faultCtl) closeConns() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.closed)
	c.closed = make(chan struct{})
}

// faultToxic is the last toxic on each direction of every connection
// through a Proxy: it is what delivers the connection's data to the
// toxiproxy goroutine writing it out. It queues the data, and passes it on
// as the Proxy's faultCtl allows: not at all while stalled, and each chunk
// no earlier than its arrival time plus the latency.
//
// It keeps reading its input while it cannot deliver (up to maxQueued
// chunks), and it gives up delivering, draining its input to the end, once
// the proxy has closed the connection. Toxiproxy's own toxics block on
// delivery instead; if the writer has failed, because the peer or the proxy
// closed the connection, nothing ever takes the data and the connection's
// goroutines stay blocked forever.
type faultToxic struct {
	ctl *faultCtl // set by NewProxy before any connection exists
}

// faultState is the per-connection, per-direction state of a faultToxic.
type faultState struct {
	closed <-chan struct{} // from faultCtl.connsClosed when the connection was accepted
	queue  []*stream.StreamChunk
	eof    bool // the input has ended
}

// NewState implements toxics.StatefulToxic. Toxiproxy calls it when it
// accepts a connection, just before it starts Pipe.
func (t *faultToxic) NewState() any {
	t.ctl.pipes.Add(1)
	return &faultState{closed: t.ctl.connsClosed()}
}

// Pipe implements toxics.Toxic. It returns when toxiproxy interrupts it to
// change the toxic chain, which this package never does, and then resumes
// from stub.State; otherwise it returns once its input has ended and it has
// delivered or dropped everything, and closes its output.
func (t *faultToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*faultState)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		cfg := t.ctl.config()
		if st.eof && len(st.queue) == 0 && !cfg.stalled {
			stub.Close() // Passes the end of the stream on.
			t.ctl.pipes.Done()
			return
		}
		var (
			in   <-chan *stream.StreamChunk
			out  chan<- *stream.StreamChunk
			head *stream.StreamChunk
			wake <-chan time.Time
		)
		if !st.eof && len(st.queue) < maxQueued {
			in = stub.Input
		}
		if !cfg.stalled && len(st.queue) > 0 {
			if wait := time.Until(st.queue[0].Timestamp.Add(cfg.latency)); wait > 0 {
				timer.Reset(wait)
				wake = timer.C
			} else {
				head, out = st.queue[0], stub.Output
			}
		}
		select {
		case <-stub.Interrupt: // Toxiproxy is changing the chain; st persists.
			return
		case <-st.closed:
			st.queue = nil
			for !st.eof { // Let the goroutines feeding us finish.
				select {
				case <-stub.Interrupt:
					return
				case c := <-stub.Input:
					st.eof = c == nil
				}
			}
			stub.Close()
			t.ctl.pipes.Done()
			return
		case c := <-in:
			if c == nil {
				st.eof = true
			} else {
				st.queue = append(st.queue, c)
			}
		case out <- head:
			st.queue[0] = nil
			st.queue = st.queue[1:]
		case <-wake:
		case <-cfg.changed:
		}
		timer.Stop() // Since Go 1.23, no stale tick can be received after Stop.
	}
}
