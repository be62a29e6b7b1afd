package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockwarden/lockwarden/actors"
)

// TestGuardianPanicOnLocate: a guardian that panics on a Locate answers the command's caller (which
// cannot give up: context.Background) with ErrActorFailed, as it answers a routed command.
func TestGuardianPanicOnLocate(t *testing.T) {
	h := &recordHandler{}
	inject, fired := panicOnce("guardian", func(msg any) bool { _, ok := msg.(*actors.Locate); return ok })
	c, _ := failureCoordinator(t, h, inject)
	s := c.Semaphore("locate:panic")
	done := make(chan error, 1)
	go func() { _, err := s.TrySetPermits(context.Background(), 1); done <- err }()
	<-fired
	select {
	case err := <-done:
		if !errors.Is(err, ErrActorFailed) {
			t.Fatalf("TrySetPermits after the guardian failed on its Locate = %v, want ErrActorFailed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("caller with context.Background still waiting 2 s after the guardian recovered from a panic on its Locate")
	}
}
