package actors

import (
	"testing"
	"time"
)

func TestQuorum(t *testing.T) {
	for _, tc := range []struct {
		n       int
		redLock bool
		want    int
	}{
		{1, false, 1}, {3, false, 3}, {5, false, 5},
		{1, true, 1}, {2, true, 2}, {3, true, 2}, {4, true, 3}, {5, true, 3}, {7, true, 4},
	} {
		if got := Quorum(tc.n, tc.redLock); got != tc.want {
			t.Errorf("Quorum(%d, redLock=%v) = %d, want %d", tc.n, tc.redLock, got, tc.want)
		}
	}
}

func TestValidity(t *testing.T) {
	for _, tc := range []struct {
		lease, elapsed, want time.Duration
	}{
		// 1% of the lease plus 2 ms of drift.
		{10 * time.Second, 0, 10*time.Second - 102*time.Millisecond},
		{10 * time.Second, 500 * time.Millisecond, 10*time.Second - 602*time.Millisecond},
		{30 * time.Second, time.Second, 30*time.Second - 1302*time.Millisecond},
		// Nothing left: the acquisition fails.
		{100 * time.Millisecond, 97 * time.Millisecond, 0},
		{100 * time.Millisecond, 200 * time.Millisecond, -103 * time.Millisecond},
	} {
		if got := Validity(tc.lease, tc.elapsed); got != tc.want {
			t.Errorf("Validity(%v, %v) = %v, want %v", tc.lease, tc.elapsed, got, tc.want)
		}
	}
}

func TestNodeTimeoutFor(t *testing.T) {
	for _, tc := range []struct{ lease, want time.Duration }{
		{30 * time.Second, 500 * time.Millisecond},
		{2 * time.Second, 200 * time.Millisecond},
		{50 * time.Millisecond, 10 * time.Millisecond},
	} {
		if got := NodeTimeoutFor(tc.lease); got != tc.want {
			t.Errorf("NodeTimeoutFor(%v) = %v, want %v", tc.lease, got, tc.want)
		}
	}
}

func TestDefaultGroupBackOff(t *testing.T) {
	b := DefaultGroupBackOff()
	var prev time.Duration
	for i := range 20 {
		d := b.NextBackOff()
		if d <= 0 || d > 750*time.Millisecond {
			t.Fatalf("pause %d = %v, want in (0, 750ms] (500ms max plus 50%% jitter)", i, d)
		}
		prev = d
	}
	if prev < 250*time.Millisecond {
		t.Errorf("pause after 20 failures = %v, want near the 500ms cap", prev)
	}
}
