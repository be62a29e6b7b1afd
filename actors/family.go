package actors

import "github.com/lockwarden/lockwarden/redisops"

// family is a set of kinds that one lock actor serves for a name, with the strategy that tells the
// actor's core how those locks differ from the others: both sides of a read-write lock share an actor,
// so that it can order local readers and writers. It is the index of the family's entry in families.
type family uint8

// The families, in the order of families.
const (
	familyPlain family = iota
	familyFair
	familyRW
	familySemaphore
	familyPermits
	familyLatch
)

// familyEntry registers one family: the kinds it serves and how to make its strategy for a name. A
// primitive family (a semaphore, a permit semaphore, a count-down latch) is served by a primitive
// actor (see primitive.go), whose strategy newPrimitiveStrategy makes, rather than by a lock actor.
type familyEntry struct {
	kinds       []Kind
	newStrategy func(name string, ops *redisops.Ops) strategy
	primitive   bool
}

// families is the registration of every family of locks, indexed by family. A new family needs its
// entry here, its Kind in messages, its strategy and its scripts; nothing in the core changes.
var families = [...]familyEntry{
	familyPlain: {kinds: []Kind{KindPlain}, newStrategy: newPlainStrategy},
	familyFair:  {kinds: []Kind{KindFair}, newStrategy: newFairStrategy},
	familyRW:    {kinds: []Kind{KindRead, KindWrite}, newStrategy: newRWStrategy},

	familySemaphore: {kinds: []Kind{KindSemaphore}, primitive: true},
	familyPermits:   {kinds: []Kind{KindPermitSemaphore}, primitive: true},
	familyLatch:     {kinds: []Kind{KindLatch}, primitive: true},
}

// familyOf is the family that serves the kind k; an unknown kind is served as a plain lock.
func familyOf(k Kind) family {
	for f, e := range families {
		for _, kind := range e.kinds {
			if kind == k {
				return family(f)
			}
		}
	}
	return familyPlain
}

// newStrategy makes the strategy of family f for the lock name.
func newStrategy(f family, name string, ops *redisops.Ops) strategy {
	return families[f].newStrategy(name, ops)
}

// KnownKind reports whether k is the kind of a registered family of locks: a lock command of another
// kind (a primitive's among them) is bad input.
func KnownKind(k Kind) bool {
	for _, e := range families {
		if e.primitive {
			continue
		}
		for _, kind := range e.kinds {
			if kind == k {
				return true
			}
		}
	}
	return false
}
