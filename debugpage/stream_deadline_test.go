package debugpage

import (
	"bufio"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestStreamLivesAfterIdle: a stream idle for more than writeTimeout, then one event larger than the
// response's buffers: the write must not reach the connection under the deadline of the last flush,
// long past, which would cut a healthy client off.
func TestStreamLivesAfterIdle(t *testing.T) {
	t.Parallel()
	p := newPage(t)
	resp, err := http.Get(p.base + "events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	<-lines                                  // retry:
	<-time.After(writeTimeout + time.Second) // idle past the write timeout
	m := p.c.Mutex(name(t, strings.Repeat("x", 16<<10)))
	if err := m.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = m.Unlock(t.Context())
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended: a healthy client was disconnected")
			}
			if strings.HasPrefix(l, "data:") {
				return // the stream lives
			}
		case <-deadline:
			t.Fatal("no event within 5s")
		}
	}
}

// TestStuckClientIsCutOff: a client that connects and reads nothing, while the history is larger than
// the socket buffers: the history's write must give up after writeTimeout, and the stream's goroutine
// end (it would otherwise stay blocked past the coordinator's Close).
func TestStuckClientIsCutOff(t *testing.T) {
	t.Parallel()
	p := newPage(t)
	big := strings.Repeat("y", 64<<10)
	for i := range 100 {
		m := p.c.Mutex(name(t, big) + string(rune('a'+i%26)) + strings.Repeat("z", i))
		if err := m.Lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		_ = m.Unlock(t.Context())
	}
	waitEvents := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		recs, _, _ := p.h.hub.history(0, false)
		if len(recs) >= 200 || time.Now().After(waitEvents) {
			break
		}
		<-tick.C
	}
	conn, err := net.Dial("tcp", p.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := conn.Write([]byte("GET " + mount + "/events HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-time.After(writeTimeout + 3*time.Second) // past the write timeout: the stream must have given up
	_ = p.c.Close()
	<-time.After(2 * time.Second)
	buf := make([]byte, 1<<22)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "debugpage.(*handler).serveEvents") {
		i := strings.Index(stacks, "debugpage.(*handler).serveEvents")
		start := strings.LastIndex(stacks[:i], "goroutine ")
		t.Fatalf("the stream's goroutine is still blocked %v after connecting and 2s after Close:\n%s", writeTimeout+5*time.Second, stacks[start:min(len(stacks), i+300)])
	}
}
