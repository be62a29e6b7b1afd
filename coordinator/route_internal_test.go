package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestMutexAfterItsActorRecycled: a handle sends its commands to its lock actor on the route it keeps;
// once that actor has gone idle, been recycled and bound to another name, the handle's next command
// goes to an actor of its own name (the guardian is asked again), and the other name is untouched.
func TestMutexAfterItsActorRecycled(t *testing.T) {
	recycled := make(chan struct{}, 16)
	inject := func(name string, msg any) {
		if name == "lock actor" && fmt.Sprintf("%T", msg) == "actors.recycle" {
			recycled <- struct{}{}
		}
	}
	c, srv := failureCoordinator(t, &recordHandler{}, inject, WithIdleTimeout(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, second := t.Name()+":first", t.Name()+":second"
	m := c.Mutex(first)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if m.bound.Load() == nil {
		t.Fatal("the handle kept no route to its actor")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case <-recycled:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle actor was not recycled within 10s")
	}
	// The pooled actor now serves the second name.
	other := c.Mutex(second)
	if err := other.Lock(ctx); err != nil {
		t.Fatalf("Lock of the second name: %v", err)
	}
	defer other.Unlock(ctx)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock after the recycle: %v", err)
	}
	defer m.Unlock(ctx)
	client := srv.Client(t)
	for name, owner := range map[string]string{first: m.Owner(), second: other.Owner()} {
		got, err := client.HGetAll(ctx, name).Result()
		if err != nil {
			t.Fatalf("HGETALL %s: %v", name, err)
		}
		if len(got) != 1 || got[owner] != "1" {
			t.Fatalf("%s = %v, want held once by %s only", name, got, owner)
		}
	}
}
