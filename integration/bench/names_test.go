package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/integration/redistest"
)

// namesFloor is the minimum number of distinct names of a BenchmarkDistinctNames run.
const namesFloor = 5000

// BenchmarkDistinctNames measures Lock+Unlock on one goroutine, each on a lock name never used before,
// with an idle timeout short enough (10 ms) that the actors of the names used before go idle during
// the run: what a name costs its coordinator, from the handle to the idle actor, is counted.
func BenchmarkDistinctNames(b *testing.B) {
	srv := redistest.Start(b)
	checkLeaks(b)
	client, rt := newClient(b, srv)
	c := newCoordinator(b, client, coordinator.WithIdleTimeout(10*time.Millisecond))
	prefix := "bench:names:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	op := func(ctx context.Context, _, i int) error {
		m := c.Mutex(prefix + strconv.Itoa(i))
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
	warm(b, 1, op)
	s := runSequential(b, ops(b, namesFloor), rt, op)
	s.report(b)
}
