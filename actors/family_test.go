package actors

import (
	"testing"

	"github.com/lockwarden/lockwarden/redisops"
)

// TestFamilies: every kind is registered by exactly one family and routes to that family's strategy;
// a lock kind is within the kinds HeldKinds has room for and known to the lock commands, a primitive's
// is not; an unregistered kind is not known.
func TestFamilies(t *testing.T) {
	seen := map[Kind]family{}
	for f, e := range families {
		if len(e.kinds) == 0 {
			t.Errorf("family %d registers no kind", f)
		}
		for _, k := range e.kinds {
			if other, dup := seen[k]; dup {
				t.Errorf("kind %v registered by families %d and %d", k, other, f)
			}
			seen[k] = family(f)
			if got := familyOf(k); got != family(f) {
				t.Errorf("familyOf(%v) = %d, want %d", k, got, f)
			}
			if e.primitive {
				if KnownKind(k) {
					t.Errorf("KnownKind(%v) = true for a primitive, want false", k)
				}
				if s := newPrimitiveStrategy(k, "name", &redisops.Ops{}); s == nil || s.lockKind() != k.LockKind() {
					t.Errorf("kind %v makes the strategy %T", k, s)
				}
				continue
			}
			if int(k) >= maxKinds {
				t.Errorf("kind %v: HeldKinds has room for %d kinds", k, maxKinds)
			}
			if !KnownKind(k) {
				t.Errorf("KnownKind(%v) = false, want true", k)
			}
		}
		if e.primitive {
			continue
		}
		if s := newStrategy(family(f), "name", &redisops.Ops{}); s == nil {
			t.Errorf("family %d makes no strategy", f)
		}
	}
	for _, k := range []Kind{KindPlain, KindFair, KindRead, KindWrite, KindSemaphore, KindPermitSemaphore, KindLatch} {
		if _, ok := seen[k]; !ok {
			t.Errorf("kind %v is not registered", k)
		}
	}
	if KnownKind(Kind(maxKinds)) {
		t.Errorf("KnownKind(%d) = true, want false", maxKinds)
	}
}
