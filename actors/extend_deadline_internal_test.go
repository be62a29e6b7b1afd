package actors

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/redisops"
)

// TestExtendRetryCutCountsFromTheFirstCall: the first extension took effect on the master (ErrRenewalNotSynced + ErrReplicasChanged, after a WAIT
// that ran its timeout); the retry fails on a connection error. The master then has the new, shorter
// lease counted from the first call; the hold's validity must not outlast it.
func TestExtendRetryCutCountsFromTheFirstCall(t *testing.T) {
	p := &fakeProtocol{}
	a := newTestLockActor(t, p, 3*time.Second)
	k, h := addHold(a, "o", 10*time.Second, false, false)
	h.lease = 10 * time.Second
	var firstRan time.Time
	calls := 0
	p.renewFn = func(holdKey) error {
		calls++
		if calls == 1 {
			firstRan = time.Now()              // the script runs: PEXPIRE 1s from here
			time.Sleep(200 * time.Millisecond) // the WAIT runs its timeout
			return fmt.Errorf("%w (%w): 0 of 1", redisops.ErrRenewalNotSynced, redisops.ErrReplicasChanged)
		}
		return errors.New("connection reset")
	}
	o := extendOutcome(t, a, k, time.Second)
	_ = o
	redisDrops := firstRan.Add(time.Second)
	if h.expires.After(redisDrops) {
		t.Fatalf("hold valid until %v after the master drops the key (the first extension's lease)", h.expires.Sub(redisDrops))
	}
}

// TestExtendAnsweredAtTheDeadline: the hold's deadline fires while the extension's answer is
// settled: Extend must not report success with a hold whose Done then closes.
func TestExtendAnsweredAtTheDeadline(t *testing.T) {
	hits := 0
	for i := 0; i < 150; i++ {
		p := &fakeProtocol{}
		a := newTestLockActor(t, p, 3*time.Second)
		k, h := addHold(a, fmt.Sprint("o", i), 20*time.Millisecond, false, false)
		h.lease = time.Second
		p.renewFn = func(holdKey) error {
			until := h.expires.Add(time.Duration(i%40) * 5 * time.Microsecond)
			for time.Now().Before(until) {
			}
			return nil
		}
		o := extendOutcome(t, a, k, time.Minute)
		if o.Err != nil {
			continue
		}
		if o.HoldCount == 1 {
			time.Sleep(5 * time.Millisecond) // a deadline timer that fired late has ended the hold by now
			if h.ended() && a.holds[k] == h {
				hits++
			}
		}
		h.deadline.Stop()
	}
	if hits > 0 {
		t.Fatalf("%d of 150 Extends answered success with a hold whose Done then closed", hits)
	}
}
