package integration

import (
	"testing"
	"time"
)

func TestLockUnlockHoldCounts(t *testing.T) {
	_, client, c := setup(t)
	m := c.Mutex(t.Name())
	want := []int{0}
	got := []int{holdCount(t, m)}
	mustLock(t, m)
	got, want = append(got, holdCount(t, m)), append(want, 1)
	mustUnlock(t, m)
	got, want = append(got, holdCount(t, m)), append(want, 0)
	mustLock(t, m)
	mustLock(t, m)
	got, want = append(got, holdCount(t, m)), append(want, 2)
	fields, err := client.HGetAll(t.Context(), t.Name()).Result()
	if err != nil || len(fields) != 1 || fields[m.Owner()] != "2" {
		t.Fatalf("HGETALL %s = %v, %v; want {%s: 2}", t.Name(), fields, err, m.Owner())
	}
	mustUnlock(t, m)
	got, want = append(got, holdCount(t, m)), append(want, 1)
	mustUnlock(t, m)
	got, want = append(got, holdCount(t, m)), append(want, 0)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("hold counts %v, want %v", got, want)
		}
	}
	if n, _ := client.Exists(t.Context(), t.Name()).Result(); n != 0 {
		t.Fatalf("lock key still exists after the last unlock")
	}
}

func TestSecondOwnerWaitsForRelease(t *testing.T) {
	_, _, c := setup(t)
	a, b := c.Mutex(t.Name()), c.Mutex(t.Name())
	mustLock(t, a)
	if ok, err := b.TryLock(t.Context()); ok || err != nil {
		t.Fatalf("TryLock by second owner = %v, %v; want false, nil", ok, err)
	}
	errc := lockAsync(t.Context(), b)
	select {
	case err := <-errc:
		t.Fatalf("second owner got the lock while it was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	mustUnlock(t, a)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("second owner Lock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second owner did not get the lock after the release")
	}
	mustUnlock(t, b)
}
