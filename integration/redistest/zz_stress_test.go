package redistest_test

import (
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockwarden/lockwarden/integration/redistest"
)

func TestZZStressUnstallInFlight(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for i := 0; i < 30; i++ {
		t.Run("x", func(t *testing.T) {
			s := redistest.Start(t)
			px := redistest.NewProxy(t, s.Addr())
			px.AddLatency(time.Millisecond)
			conn, err := net.Dial("tcp", px.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					if _, err := conn.Write([]byte("PING\r\n")); err != nil {
						return
					}
				}
			}()
			go func() { buf := make([]byte, 1<<16); for { if _, err := conn.Read(buf); err != nil { return } } }()
			time.Sleep(20 * time.Millisecond)
			px.Stall()
			time.Sleep(20 * time.Millisecond)
			px.Unstall()
			px.RemoveLatency()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("writer still running 5s after Unstall")
			}
		})
		goleak.VerifyNone(t, ignore)
	}
}
