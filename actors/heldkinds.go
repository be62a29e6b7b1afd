package actors

import (
	"hash/maphash"
	"sort"
	"sync"
	"time"
)

// HeldKinds records, across the lock actors of one coordinator, which kinds of lock each owner holds
// or asks for on each name. Each lock actor serves one family of kinds (plain, fair, read-write), and
// the families share the hash at the name in Redis, so an owner id used for two families (an explicit
// owner, or an actor of the message API) could release or re-enter one family's hold through the
// other: a plain release would delete a fair lock's hash and leave its queue behind, and a plain and
// a fair acquisition of one owner sent together would both be granted, the second as a re-entry of
// the first (the plain and fair scripts cannot tell their holds apart). So a lock actor reserves the
// kind of an acquisition when it arrives, with a check that no other family is held or reserved for
// the owner on the name, and frees the reservation when the acquisition ends: granted (then the
// hold's record takes over) or not. A fair waiter whose caller left ends only once it has left the
// queue in Redis (retries included): until then another process's release may hand it the lock
// there. A command of another family than what its owner holds or waits
// for on the name is refused with [ErrKindMismatch]. It is safe for concurrent use; the zero value is
// ready.
//
// Every lock actor of the coordinator updates it on every acquisition and release, so the records are
// spread over shards by name, each with a lock of its own: with one lock, the callers of 32 goroutines
// on 32 names waited about 2.5 µs per Lock+Unlock for it (a mutex profile of
// BenchmarkUncontendedParallel). The records of one name (and so its three families) are all in one
// shard.
type HeldKinds struct {
	shards [heldShards]heldShard
}

// heldShards is the number of shards of a HeldKinds.
const heldShards = 32

// heldShard is one shard of a HeldKinds, padded to a cache line of its own.
type heldShard struct {
	mu    sync.Mutex
	kinds map[heldName]*ownerKinds
	// spare are records that forget dropped, zeroed, for entry to reuse: an owner's record is made
	// and dropped with every hold it takes of a name it held nothing of, the common Lock+Unlock.
	spare []*ownerKinds
	_     [64 - 40]byte
}

// maxSpareKinds bounds the records a shard keeps for reuse.
const maxSpareKinds = 16

// heldSeed hashes the names of every HeldKinds to their shards.
var heldSeed = maphash.MakeSeed()

// shard returns the shard of name's records.
func (h *HeldKinds) shard(name string) *heldShard {
	return &h.shards[maphash.String(heldSeed, name)%heldShards]
}

type heldName struct{ name, owner string }

// ownerKinds is what one owner holds and asks for on one name.
type ownerKinds struct {
	held uint8 // a bit per Kind held
	// pending counts the acquisitions of each Kind reserved and not ended yet. int32 keeps the
	// record as small as with int counts of the four kinds there were.
	pending [maxKinds]int32
	// heldSince is when the owner got its first hold of the kinds held, waitSince when it asked for the
	// first of the acquisitions pending (zero when not known), for Snapshot.
	heldSince, waitSince time.Time
}

// maxKinds bounds the number of kinds of lock (the bits of ownerKinds.held).
const maxKinds = 8

func (o *ownerKinds) empty() bool { return o.held == 0 && o.pending == [maxKinds]int32{} }

// otherFamily reports whether o holds or asks for a kind of another family than k.
func (o *ownerKinds) otherFamily(k Kind) bool {
	for other := range Kind(maxKinds) {
		if (o.held&(1<<other) != 0 || o.pending[other] > 0) && familyOf(other) != familyOf(k) {
			return true
		}
	}
	return false
}

// entry returns the record of owner on name, made if need be; h.mu is held.
func (h *heldShard) entry(name, owner string) *ownerKinds {
	if h.kinds == nil {
		h.kinds = make(map[heldName]*ownerKinds)
	}
	key := heldName{name, owner}
	o := h.kinds[key]
	if o == nil {
		if n := len(h.spare); n > 0 {
			o, h.spare = h.spare[n-1], h.spare[:n-1]
		} else {
			o = &ownerKinds{}
		}
		h.kinds[key] = o
	}
	return o
}

// forget drops the record of owner on name when nothing is left in it; h.mu is held.
func (h *heldShard) forget(name, owner string) {
	key := heldName{name, owner}
	if o := h.kinds[key]; o != nil && o.empty() {
		delete(h.kinds, key)
		if len(h.spare) < maxSpareKinds {
			*o = ownerKinds{}
			h.spare = append(h.spare, o)
		}
	}
}

// add records a hold of kind k by owner on name, granted at since.
func (h *HeldKinds) add(name, owner string, k Kind, since time.Time) {
	if h == nil {
		return
	}
	s := h.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.entry(name, owner)
	if o.held == 0 {
		o.heldSince = since
	}
	o.held |= 1 << k
}

func (h *HeldKinds) remove(name, owner string, k Kind) {
	if h == nil {
		return
	}
	s := h.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.kinds[heldName{name, owner}]; o != nil {
		o.held &^= 1 << k
		s.forget(name, owner)
	}
}

// reserve records an acquisition of kind k by owner on name and reports true, unless owner holds or
// asks for name as a kind of another family: then it records nothing and reports false. The check
// and the record are one step, so that of two acquisitions of different families that arrive
// together, the second is refused.
// The caller asked at asked (zero: now).
func (h *HeldKinds) reserve(name, owner string, k Kind, asked time.Time) bool {
	if h == nil {
		return true
	}
	s := h.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.entry(name, owner)
	if o.otherFamily(k) {
		s.forget(name, owner)
		return false
	}
	if o.pending == [maxKinds]int32{} {
		if asked.IsZero() {
			asked = time.Now()
		}
		o.waitSince = asked
	}
	o.pending[k]++
	return true
}

// unreserve ends an acquisition that reserve recorded.
func (h *HeldKinds) unreserve(name, owner string, k Kind) {
	if h == nil {
		return
	}
	s := h.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.kinds[heldName{name, owner}]; o != nil && o.pending[k] > 0 {
		o.pending[k]--
		s.forget(name, owner)
	}
}

// otherFamily reports whether owner holds or asks for name as a kind of another family than k.
func (h *HeldKinds) otherFamily(name, owner string, k Kind) bool {
	if h == nil {
		return false
	}
	s := h.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.kinds[heldName{name, owner}]
	return o != nil && o.otherFamily(k)
}

// OwnerState is what one owner holds and asks for on one lock name, in a [HeldKinds.Snapshot].
type OwnerState struct {
	// Name is the lock name and Owner the owner id.
	Name, Owner string
	// Held are the kinds of lock the owner holds on the name.
	Held []Kind
	// HeldSince is when the first of the owner's holds of those kinds was granted; zero when none is.
	HeldSince time.Time
	// Waiting counts the owner's acquisitions of each kind asked for and not answered yet (waiting,
	// or under way).
	Waiting map[Kind]int
	// WaitingSince is when the first of them was asked for; zero when none waits.
	WaitingSince time.Time
}

// Snapshot returns what every owner holds and asks for, sorted by name and owner. It reads the shards
// one after another, so records of names in different shards may be from moments apart; each record
// is whole.
func (h *HeldKinds) Snapshot() []OwnerState {
	if h == nil {
		return nil
	}
	var out []OwnerState
	for i := range h.shards {
		out = h.shards[i].snapshot(out)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Owner < out[j].Owner
	})
	return out
}

// snapshot appends the shard's records to out (see HeldKinds.Snapshot).
func (h *heldShard) snapshot(out []OwnerState) []OwnerState {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, o := range h.kinds {
		st := OwnerState{Name: key.name, Owner: key.owner}
		for k := range Kind(maxKinds) {
			if o.held&(1<<k) != 0 {
				st.Held = append(st.Held, k)
			}
			if n := o.pending[k]; n > 0 {
				if st.Waiting == nil {
					st.Waiting = make(map[Kind]int)
				}
				st.Waiting[k] = int(n)
			}
		}
		if len(st.Held) > 0 {
			st.HeldSince = o.heldSince
		}
		if len(st.Waiting) > 0 {
			st.WaitingSince = o.waitSince
		}
		out = append(out, st)
	}
	return out
}

// HeldEntry is an owner's holds on a name, in [HeldKinds.HeldBefore].
type HeldEntry struct {
	// Name is the lock name and Owner the owner id.
	Name, Owner string
	// Since is when the first of the owner's holds on the name was granted.
	Since time.Time
}

// HeldBefore appends to into every owner that has held something on a name since before cutoff, and
// returns it sorted, oldest first (then by name and owner), so that a caller that keeps the first n
// keeps the same ones from call to call. Under the lock of each shard it only copies the entries, into
// into's storage when it is large enough: a caller that polls it passes the slice it got last time.
func (h *HeldKinds) HeldBefore(cutoff time.Time, into []HeldEntry) []HeldEntry {
	into = into[:0]
	if h == nil {
		return into
	}
	for i := range h.shards {
		into = h.shards[i].heldBefore(cutoff, into)
	}
	sort.Slice(into, func(i, j int) bool {
		a, b := into[i], into[j]
		if !a.Since.Equal(b.Since) {
			return a.Since.Before(b.Since)
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Owner < b.Owner
	})
	return into
}

// heldBefore appends the shard's entries held since before cutoff to into (see HeldKinds.HeldBefore).
func (h *heldShard) heldBefore(cutoff time.Time, into []HeldEntry) []HeldEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, o := range h.kinds {
		if o.held != 0 && !o.heldSince.IsZero() && o.heldSince.Before(cutoff) {
			into = append(into, HeldEntry{Name: key.name, Owner: key.owner, Since: o.heldSince})
		}
	}
	return into
}
