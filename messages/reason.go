package messages

// Reason says why a lock command did not succeed.
type Reason int

const (
	// ReasonNone means the command succeeded.
	ReasonNone Reason = iota
	// ReasonNotObtained means another owner holds the lock and the command did not wait for it.
	ReasonNotObtained
	// ReasonNotHeld means the owner does not hold the lock, or its hold was lost.
	ReasonNotHeld
	// ReasonClosed means the coordinator closed before the command finished.
	ReasonClosed
	// ReasonRedis means Redis answered with an error.
	ReasonRedis
	// ReasonUpgrade means an owner holding read holds of a read-write lock asked for the write lock.
	ReasonUpgrade
	// ReasonNotSynced means Redis gave the lock but fewer replicas than required acknowledged it in
	// time, so the hold was given back (the replica-sync safeguard).
	ReasonNotSynced
	// ReasonKindMismatch means the owner holds the lock's name as another kind of lock than the
	// command is for (a Release of KindPlain for a hold of KindFair, say), or is acquiring it as
	// another kind; nothing was changed.
	ReasonKindMismatch
)

// String returns the reason's name.
func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonNotObtained:
		return "not obtained"
	case ReasonNotHeld:
		return "not held"
	case ReasonClosed:
		return "closed"
	case ReasonRedis:
		return "redis error"
	case ReasonUpgrade:
		return "upgrade refused"
	case ReasonNotSynced:
		return "not synced to replicas"
	case ReasonKindMismatch:
		return "kind mismatch"
	default:
		return "unknown"
	}
}
