package redistest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Toxic names. Toxiproxy identifies toxics by name within a proxy, and each
// toxic applies to a single direction, so every fault is a pair of toxics.
const (
	stallToxic   = "redistest_stall"
	latencyToxic = "redistest_latency"
)

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
type Proxy struct {
	tb   testing.TB
	addr string // fixed for the Proxy's lifetime

	mu       sync.Mutex
	p        *toxiproxy.Proxy
	disabled bool
	stalled  bool
	latency  time.Duration // 0 when there is no latency toxic
}

// NewProxy starts a TCP proxy on a free port on 127.0.0.1 that forwards
// every connection it accepts to upstream, for example a Server's
// [Server.Addr]. The proxy dials upstream anew for each accepted
// connection; if that fails, it closes the accepted connection, so a client
// of a proxy whose upstream is down sees its connection closed rather than
// refused.
//
// NewProxy registers a cleanup with tb that stops the proxy and closes all
// connections through it. It calls tb.Fatalf if the proxy cannot listen.
//
// Toxiproxy's logging is discarded.
func NewProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "redistest", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		tb.Fatalf("redistest: NewProxy: starting proxy to %s: %v", upstream, err)
	}
	// Start has replaced the :0 in Listen with the port actually bound; a
	// restart (Enable) listens on the same address again.
	px := &Proxy{tb: tb, addr: p.Listen, p: p}
	tb.Cleanup(px.p.Stop)
	return px
}

// Addr returns the address the proxy listens on, as "127.0.0.1:port". It
// does not change across [Proxy.Disable] and [Proxy.Enable].
func (px *Proxy) Addr() string {
	return px.addr
}

// Cut is an alias for [Proxy.Disable]: it stops the listener and drops
// every connection through the proxy.
func (px *Proxy) Cut() {
	px.tb.Helper()
	px.Disable()
}

// Disable stops the proxy: its listener is closed, so new connections are
// refused, and every connection through it is closed, so clients see EOF or
// a reset on their next read or write. Disabling a disabled proxy does
// nothing. Toxics added with Stall or AddLatency are kept and apply again
// after Enable.
func (px *Proxy) Disable() {
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.disabled {
		return
	}
	px.p.Stop()
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
// open, and new ones are accepted, but no data flows in either direction.
// Everything written while the proxy is stalled, by either side, is
// discarded, so clients observe read timeouts rather than connection
// errors. Stalling a stalled proxy does nothing.
//
// Stall uses a toxiproxy "timeout" toxic with a timeout of 0 on each
// direction.
func (px *Proxy) Stall() {
	px.tb.Helper()
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.stalled {
		return
	}
	px.addToxics(stallToxic, "timeout", map[string]any{"timeout": 0})
	px.stalled = true
}

// Unstall ends a stall started by [Proxy.Stall]. New connections then work
// normally, but every connection that existed during the stall, including
// those opened while it lasted, is closed: toxiproxy closes a connection
// when its timeout toxic is removed. Because the data sent during the stall
// was discarded, such connections could not have been used safely anyway.
// Unstalling a proxy that is not stalled does nothing.
func (px *Proxy) Unstall() {
	px.tb.Helper()
	px.mu.Lock()
	defer px.mu.Unlock()
	if !px.stalled {
		return
	}
	px.removeToxics(stallToxic)
	px.stalled = false
}

// AddLatency delays the data flowing through the proxy by d in each
// direction, so a request/response round trip takes at least 2*d longer.
// It applies to existing and new connections, and replaces any latency
// added before. d is rounded up to a whole number of milliseconds; it must
// be positive, or AddLatency calls tb.Fatalf.
func (px *Proxy) AddLatency(d time.Duration) {
	px.tb.Helper()
	if d <= 0 {
		px.tb.Fatalf("redistest: AddLatency: latency must be positive, got %v", d)
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.latency != 0 {
		// Not UpdateToxicJson: in toxiproxy v2.5.0 it rewrites the toxic's
		// attributes while the connections' goroutines are reading them, a
		// data race that -race reports.
		px.removeToxics(latencyToxic)
		px.latency = 0
	}
	px.addToxics(latencyToxic, "latency", map[string]any{"latency": ms, "jitter": 0})
	px.latency = time.Duration(ms) * time.Millisecond
}

// RemoveLatency removes the latency added by [Proxy.AddLatency]. Data it
// was holding back is delivered at once. Removing latency from a proxy that
// has none does nothing.
func (px *Proxy) RemoveLatency() {
	px.tb.Helper()
	px.mu.Lock()
	defer px.mu.Unlock()
	if px.latency == 0 {
		return
	}
	px.removeToxics(latencyToxic)
	px.latency = 0
}

// directions are the toxiproxy stream names: upstream is client to server,
// downstream server to client.
var directions = []string{"upstream", "downstream"}

// addToxics adds a toxic of the given type and attributes on both
// directions, named name_upstream and name_downstream. px.mu must be held.
func (px *Proxy) addToxics(name, typ string, attrs map[string]any) {
	px.tb.Helper()
	for _, dir := range directions {
		body, err := json.Marshal(map[string]any{
			"name":       name + "_" + dir,
			"type":       typ,
			"stream":     dir,
			"toxicity":   1.0,
			"attributes": attrs,
		})
		if err != nil {
			px.tb.Fatalf("redistest: encoding %s toxic: %v", typ, err)
		}
		if _, err := px.p.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
			px.tb.Fatalf("redistest: adding %s toxic %s_%s: %v", typ, name, dir, err)
		}
	}
}

// removeToxics removes both toxics added by addToxics with name. px.mu
// must be held.
func (px *Proxy) removeToxics(name string) {
	px.tb.Helper()
	for _, dir := range directions {
		if err := px.p.Toxics.RemoveToxic(context.Background(), name+"_"+dir); err != nil {
			px.tb.Fatalf("redistest: removing toxic %s_%s: %v", name, dir, err)
		}
	}
}
