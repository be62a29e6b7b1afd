package bench

import (
	"context"
	"testing"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// BenchmarkEvents measures one uncontended acquire+release on one goroutine with no event subscriber,
// with a subscriber that drains its events, and with a subscriber that never reads (buffer 1, so all
// but one event is dropped for it). It reports p50/none: the p50 over the no-subscriber run's median
// p50 of the same run. A blocked subscriber must not slow the locks down: its ratio should be that of
// a draining one.
func BenchmarkEvents(b *testing.B) {
	srv := redistest.Start(b)
	var noneP50 []float64
	for _, tc := range []struct {
		name string
		sub  func(c *coordinator.Coordinator) func()
	}{
		{"none", nil},
		{"draining", func(c *coordinator.Coordinator) func() {
			s := c.Subscribe(nil, 1024)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range s.Events() {
				}
			}()
			return func() { s.Close(); <-done }
		}},
		{"blocked", func(c *coordinator.Coordinator) func() {
			s := c.Subscribe(nil, 1)
			return s.Close
		}},
	} {
		b.Run("subscriber="+tc.name, func(b *testing.B) {
			checkLeaks(b)
			client, rt := newClient(b, srv)
			c := newCoordinator(b, client)
			if tc.sub != nil {
				b.Cleanup(tc.sub(c))
			}
			m := c.Mutex("bench:events:" + tc.name)
			op := func(ctx context.Context, _, _ int) error {
				if err := m.Lock(ctx); err != nil {
					return err
				}
				return m.Unlock(ctx)
			}
			warm(b, 1, op)
			s := runSequential(b, ops(b, uncontendedFloor), rt, op)
			s.report(b)
			if tc.sub == nil {
				noneP50 = append(noneP50, us(s.p50))
			} else if base := median(noneP50); base > 0 {
				b.ReportMetric(us(s.p50)/base, "p50/none")
			}
		})
	}
}
