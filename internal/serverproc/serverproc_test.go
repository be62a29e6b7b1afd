package serverproc

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestOutputKeepsTheLastBytes(t *testing.T) {
	o := NewOutput(8)
	for _, s := range []string{"abc", "defgh", "ijk"} {
		if n, err := o.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := o.String(); got != "defghijk" {
		t.Errorf("String() = %q, want the last 8 bytes %q", got, "defghijk")
	}
}

func TestOutputTail(t *testing.T) {
	for _, c := range []struct {
		written string
		max     int
		want    string
	}{
		{"", 16, "; it printed nothing"},
		{"\n\n", 16, "; it printed nothing"},
		{"ready\n", 16, "\n--- redis-server output (tail) ---\nready"},
		{"0123456789\n", 4, "\n--- redis-server output (tail) ---\n...789"},
	} {
		o := NewOutput(64)
		_, _ = o.Write([]byte(c.written))
		if got := o.Tail(c.max); got != c.want {
			t.Errorf("Tail(%d) after %q = %q, want %q", c.max, c.written, got, c.want)
		}
	}
}

func TestFreePortIsBindable(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatalf("FreePort: %v", err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listening on the port FreePort gave (%d): %v", port, err)
	}
	_ = l.Close()
}

func TestPing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	replies := make(chan string, 2)
	replies <- "+PONG\r\n"
	replies <- "-LOADING Redis is loading the dataset in memory\r\n"
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 64)
			if n, err := conn.Read(buf); err == nil && strings.HasPrefix(string(buf[:n]), "PING") {
				_, _ = conn.Write([]byte(<-replies))
			}
			_ = conn.Close()
		}
	}()
	if !Ping(l.Addr().String()) {
		t.Error("Ping = false for a server answering +PONG")
	}
	if Ping(l.Addr().String()) {
		t.Error("Ping = true for a server answering an error")
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if Ping(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))) {
		t.Error("Ping = true with nothing listening")
	}
}
