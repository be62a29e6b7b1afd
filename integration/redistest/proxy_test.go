package redistest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

// proxyTimeout is the dial and read timeout of proxyClient's clients.
const proxyTimeout = 300 * time.Millisecond

// proxyClient returns a client of px that fails fast: no command retries, a
// single dial attempt, and 300ms dial, read and write timeouts.
func proxyClient(t *testing.T, px *redistest.Proxy) *redis.Client {
	return proxyClientTimeout(t, px, proxyTimeout)
}

// proxyClientTimeout is proxyClient with the given timeouts.
func proxyClientTimeout(t *testing.T, px *redistest.Proxy, timeout time.Duration) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:          px.Addr(),
		DialTimeout:   timeout,
		ReadTimeout:   timeout,
		WriteTimeout:  timeout,
		MaxRetries:    -1,
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustPing(t *testing.T, c *redis.Client) {
	t.Helper()
	if got, err := c.Ping(t.Context()).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v; want PONG, nil", got, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestProxyForwards(t *testing.T) {
	s := redistest.Start(t)
	px := redistest.NewProxy(t, s.Addr())
	if px.Addr() == s.Addr() {
		t.Fatalf("proxy listens on the server's own address %s", s.Addr())
	}
	c := proxyClient(t, px)
	mustPing(t, c)
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through proxy: %v", err)
	}
	if got, err := s.Client(t).Get(t.Context(), "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET on server = %q, %v; want v, nil", got, err)
	}
}

func TestProxyDisableEnable(t *testing.T) {
	s := redistest.Start(t)
	px := redistest.NewProxy(t, s.Addr())
	addr := px.Addr()
	c := proxyClient(t, px)
	mustPing(t, c)

	px.Disable()
	px.Disable() // no-op
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("PING through a disabled proxy succeeded")
	}
	if conn, err := net.DialTimeout("tcp", addr, proxyTimeout); err == nil {
		conn.Close()
		t.Fatal("dialling a disabled proxy succeeded; want connection refused")
	}
	// The server itself is unaffected.
	mustPing(t, s.Client(t))

	px.Enable()
	px.Enable() // no-op
	if px.Addr() != addr {
		t.Fatalf("Addr() = %s after Enable, was %s", px.Addr(), addr)
	}
	mustPing(t, c)
}

func TestProxyDisableDropsConnections(t *testing.T) {
	s := redistest.Start(t)
	px := redistest.NewProxy(t, s.Addr())
	conn, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rawPing(t, conn)

	px.Disable()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("reading from a connection through a disabled proxy: err = %v; want EOF or reset", err)
	}
}

func TestProxyStallUnstall(t *testing.T) {
	s := redistest.Start(t)
	px := redistest.NewProxy(t, s.Addr())
	c := proxyClient(t, px)
	mustPing(t, c)

	px.Stall()
	px.Stall() // no-op
	start := time.Now()
	err := c.Ping(t.Context()).Err()
	if !isTimeout(err) {
		t.Fatalf("PING through a stalled proxy: err = %v; want a timeout", err)
	}
	if elapsed := time.Since(start); elapsed < proxyTimeout {
		t.Fatalf("PING through a stalled proxy failed after %v, before the %v read timeout", elapsed, proxyTimeout)
	}

	// New connections are accepted but nothing comes back.
	conn, err := net.DialTimeout("tcp", px.Addr(), proxyTimeout)
	if err != nil {
		t.Fatalf("dialling a stalled proxy: %v; want success", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(proxyTimeout))
	if n, err := conn.Read(make([]byte, 16)); !isTimeout(err) {
		t.Fatalf("reading through a stalled proxy: n = %d, err = %v; want a timeout", n, err)
	}
	// The server itself is unaffected.
	mustPing(t, s.Client(t))

	px.Unstall()
	px.Unstall() // no-op
	mustPing(t, c)

	// The connection opened during the stall survives it and gets the
	// answer to the PING it sent then.
	buf := make([]byte, 7)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "+PONG\r\n" {
		t.Fatalf("reading the stalled connection after Unstall = %q, %v; want +PONG", buf, err)
	}
	rawPing(t, conn)
}

func TestProxyLatency(t *testing.T) {
	const latency = 100 * time.Millisecond
	s := redistest.Start(t)
	px := redistest.NewProxy(t, s.Addr())
	c := proxyClientTimeout(t, px, 5*time.Second)
	mustPing(t, c) // open the connection before adding latency

	timedPing := func() time.Duration {
		t.Helper()
		start := time.Now()
		mustPing(t, c)
		return time.Since(start)
	}

	// A second AddLatency replaces the first.
	px.AddLatency(10 * time.Millisecond)
	px.AddLatency(latency)
	if got := timedPing(); got < 2*latency {
		t.Fatalf("PING with %v latency each way took %v; want at least %v", latency, got, 2*latency)
	}
	// New connections get the latency too.
	c2 := proxyClientTimeout(t, px, 5*time.Second)
	start := time.Now()
	if err := c2.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING on a new connection with latency: %v", err)
	}
	if got := time.Since(start); got < 2*latency {
		t.Fatalf("PING on a new connection with %v latency each way took %v; want at least %v", latency, got, 2*latency)
	}

	px.RemoveLatency()
	px.RemoveLatency() // no-op
	if got := timedPing(); got >= 2*latency {
		t.Logf("PING after RemoveLatency took %v (slow machine?)", got)
	}
}

func TestProxyUpstreamDown(t *testing.T) {
	s := redistest.Start(t)
	px := redistest.NewProxy(t, s.Addr())
	c := proxyClient(t, px)
	mustPing(t, c)
	s.Kill()
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("PING through a proxy to a killed server succeeded")
	}
	s.Restart(t)
	mustPing(t, c)
}

func TestProxyMisuse(t *testing.T) {
	s := redistest.Start(t)
	msg := fatalMessage(t, func(tb testing.TB) {
		px := redistest.NewProxy(tb, s.Addr())
		px.AddLatency(0)
	})
	if !strings.Contains(msg, "latency must be positive") {
		t.Fatalf("AddLatency(0) failed with %q; want a message about a non-positive latency", msg)
	}
}

// TestProxyNoLeak checks that a proxy leaves no goroutines behind once its
// test has finished, whatever faults were active when it stopped, even with
// data in flight: each subtest also pipelines PINGs on a raw connection and
// closes it without reading the answers.
func TestProxyNoLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for _, tc := range []struct {
		name  string
		fault func(*redistest.Proxy)
	}{
		{"none", func(*redistest.Proxy) {}},
		{"disabled", (*redistest.Proxy).Disable},
		{"stalled", (*redistest.Proxy).Stall},
		{"latency", func(px *redistest.Proxy) { px.AddLatency(50 * time.Millisecond) }},
		{"all", func(px *redistest.Proxy) {
			px.AddLatency(50 * time.Millisecond)
			px.Stall()
			px.Disable()
		}},
		{"cycled", func(px *redistest.Proxy) {
			px.AddLatency(50 * time.Millisecond)
			px.Stall()
			px.Disable()
			px.Enable()
			px.Unstall()
			px.RemoveLatency()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			px := redistest.NewProxy(t, s.Addr())
			c := proxyClient(t, px)
			mustPing(t, c)
			conn, err := net.Dial("tcp", px.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			tc.fault(px)
			_ = c.Ping(t.Context()).Err()
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write([]byte(strings.Repeat("PING\r\n", 10000)))
		})
		goleak.VerifyNone(t, ignore)
	}
}

// rawPing sends an inline PING on conn and expects +PONG.
func rawPing(t *testing.T, conn net.Conn) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "+PONG\r\n" {
		t.Fatalf("PING = %q, %v; want +PONG", buf, err)
	}
	_ = conn.SetDeadline(time.Time{})
}

// TestProxyIntegrity checks that data crossing the proxy in many chunks
// while faults come and go arrives intact and in order.
func TestProxyIntegrity(t *testing.T) {
	s := redistest.Start(t)
	px := redistest.NewProxy(t, s.Addr())
	c := proxyClientTimeout(t, px, 10*time.Second)
	val := make([]byte, 4<<20)
	for i := range val {
		val[i] = byte(i * 7 / 3)
	}
	px.AddLatency(5 * time.Millisecond)
	px.Stall()
	set := make(chan error, 1)
	go func() { set <- c.Set(context.Background(), "big", val, 0).Err() }()
	time.Sleep(100 * time.Millisecond)
	px.RemoveLatency()
	px.Unstall()
	if err := <-set; err != nil {
		t.Fatalf("SET of %d bytes through the proxy: %v", len(val), err)
	}
	px.AddLatency(5 * time.Millisecond)
	got, err := c.Get(t.Context(), "big").Bytes()
	if err != nil {
		t.Fatalf("GET through the proxy: %v", err)
	}
	if !bytes.Equal(got, val) {
		t.Fatalf("GET through the proxy returned %d bytes that differ from the %d written", len(got), len(val))
	}
}
