package coordinator

import (
	"testing"
	"time"
)

// nodeRuns keeps a RedLock node out for the grace after a change of run id was seen, and trusts the
// first run id it sees.
func TestNodeRunsSee(t *testing.T) {
	const grace = 10 * time.Second
	t0 := time.Unix(1_000_000, 0)
	var n nodeRuns
	for _, step := range []struct {
		what  string
		runID string
		at    time.Duration
		until time.Duration // 0: not kept out
	}{
		{"first sight is trusted", "a", 0, 0},
		{"same run id", "a", time.Second, 0},
		{"restart seen", "b", 2 * time.Second, 12 * time.Second},
		{"still out", "b", 11 * time.Second, 12 * time.Second},
		{"back after the grace", "b", 12 * time.Second, 0},
		{"another restart", "c", 20 * time.Second, 30 * time.Second},
	} {
		got := n.see(step.runID, t0.Add(step.at), grace)
		want := time.Time{}
		if step.until > 0 {
			want = t0.Add(step.until)
		}
		if !got.Equal(want) {
			t.Errorf("%s: see(%q) at +%v = %v, want %v", step.what, step.runID, step.at, got, want)
		}
	}
}
