package redisops_test

import (
	"testing"

	"github.com/lockwarden/lockwarden/redisops"
)

func TestRaiseToken(t *testing.T) {
	t.Parallel()
	ops, c := setup(t)
	name := t.Name()
	key := redisops.TokenKey(name)

	// A counter that does not exist yet is raised to the floor.
	if got, err := ops.RaiseToken(t.Context(), name, 5); err != nil || got != 5 {
		t.Fatalf("RaiseToken(5) on no counter = %d, %v; want 5, nil", got, err)
	}
	// A lower floor never lowers it.
	if got, err := ops.RaiseToken(t.Context(), name, 3); err != nil || got != 5 {
		t.Fatalf("RaiseToken(3) on 5 = %d, %v; want 5, nil", got, err)
	}
	// The next acquisition continues from the raised value.
	got := mustAcquire(t, ops, name, "A", lease)
	if got.Token != 6 {
		t.Errorf("token after a raise to 5: got %d, want 6", got.Token)
	}
	if got, err := ops.RaiseToken(t.Context(), name, 9); err != nil || got != 9 {
		t.Fatalf("RaiseToken(9) on 6 = %d, %v; want 9, nil", got, err)
	}
	if v, err := c.Get(t.Context(), key).Int64(); err != nil || v != 9 {
		t.Errorf("GET %s = %d, %v; want 9", key, v, err)
	}
}
