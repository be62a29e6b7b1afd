package actors

import "sync"

// HeldKinds records, across the lock actors of one coordinator, which kinds of lock each owner holds on
// each name. Each lock actor serves one family of kinds (plain, fair, read-write), and the families
// share the hash at the name in Redis, so an owner id used for two families (an explicit owner, or an
// actor of the message API) could release or re-enter one family's hold through the other: a plain
// release would delete a fair lock's hash and leave its queue behind. The lock actors record their
// holds here and refuse, with [ErrKindMismatch], a command of another family than the holds its owner
// has on the name. It is safe for concurrent use; the zero value is ready.
type HeldKinds struct {
	mu    sync.Mutex
	kinds map[heldName]uint8 // a bit per Kind
}

type heldName struct{ name, owner string }

func (h *HeldKinds) add(name, owner string, k Kind) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kinds == nil {
		h.kinds = make(map[heldName]uint8)
	}
	h.kinds[heldName{name, owner}] |= 1 << k
}

func (h *HeldKinds) remove(name, owner string, k Kind) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	key := heldName{name, owner}
	if bits := h.kinds[key] &^ (1 << k); bits != 0 {
		h.kinds[key] = bits
	} else {
		delete(h.kinds, key)
	}
}

// otherFamily reports whether owner holds name as a kind of another family than k.
func (h *HeldKinds) otherFamily(name, owner string, k Kind) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	bits := h.kinds[heldName{name, owner}]
	h.mu.Unlock()
	for other := KindPlain; other <= KindWrite; other++ {
		if bits&(1<<other) != 0 && other.family() != k.family() {
			return true
		}
	}
	return false
}
