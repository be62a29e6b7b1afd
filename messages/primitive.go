package messages

import "time"

// PrimitiveOp is the operation of a [Primitive] message.
type PrimitiveOp uint8

// The operations of a Primitive message, each on the kinds its comment names.
const (
	// OpAcquire takes N permits (Semaphore; at least 1) or N permits with ids (PermitSemaphore), waiting
	// up to Wait. A permit semaphore's permits have the lease Lease, or, with Lease 0, are renewed by
	// the coordinator's watchdog until released or the coordinator closes. OK reports whether they
	// were taken; PermitIDs are the permits'.
	OpAcquire PrimitiveOp = iota + 1
	// OpRelease gives back N permits (Semaphore), or the permit ID (PermitSemaphore).
	OpRelease
	// OpTrySet sets the permits (semaphores) or the count (CountDownLatch) to N if none is set; OK
	// reports whether it did.
	OpTrySet
	// OpAdd adds N permits, which may be negative (semaphores).
	OpAdd
	// OpAvailable reads the available permits, or a latch's count, into Value.
	OpAvailable
	// OpDrain takes every available permit of a Semaphore; Value is how many.
	OpDrain
	// OpCountDown counts a CountDownLatch down by one.
	OpCountDown
	// OpAwait waits up to Wait for a CountDownLatch's count to be zero; OK reports whether it was.
	OpAwait
	// OpDelete deletes a CountDownLatch; OK reports whether there was one.
	OpDelete
)

// Primitive asks the coordinator's gateway for one operation on a semaphore (KindSemaphore), a permit
// semaphore (KindPermitSemaphore) or a count-down latch (KindLatch), with the behaviour of the
// matching method of the coordinator's Semaphore, PermitSemaphore and CountDownLatch handles. Send it
// with Request or RequestFuture to the coordinator's PID. The reply is [*PrimitiveReply] or [*Error]
// (invalid input, an operation the kind has not, a Redis error, a closed coordinator).
//
// Permits taken through messages belong to nobody in particular, as a Semaphore's do: they are not
// given back when the sender stops; a permit semaphore's watchdog permits are renewed until a Release
// of their id, or until the coordinator closes.
type Primitive struct {
	// Name is the semaphore's or latch's name; it must not be empty ([*Error] matching
	// coordinator.ErrEmptyName).
	Name string
	// Kind is KindSemaphore, KindPermitSemaphore or KindLatch; another kind gets an [*Error] matching
	// coordinator.ErrInvalidKind.
	Kind Kind
	// Op is the operation; one that Kind has not (see the operations' comments), or the zero value,
	// gets an [*Error] matching coordinator.ErrInvalidMessage.
	Op PrimitiveOp
	// N is the number of permits, the count, or the delta, as Op says.
	N int64
	// Wait bounds OpAcquire and OpAwait: 0 makes one attempt, a positive duration waits up to that
	// long, and WaitForever waits until the operation succeeds or the coordinator closes.
	Wait time.Duration
	// Lease is the lease of a permit semaphore's permits; 0 takes watchdog permits.
	Lease time.Duration
	// ID is the permit of an OpRelease on a permit semaphore.
	ID string
}

// PrimitiveReply is the reply to a [Primitive] message that was carried out.
type PrimitiveReply struct {
	// Name is the name, as in the Primitive.
	Name string
	// Kind is the kind, as in the Primitive.
	Kind Kind
	// Op is the operation that was carried out, as in the Primitive.
	Op PrimitiveOp
	// OK is the operation's yes or no: taken, set, zero reached, deleted.
	OK bool
	// Value is the count that OpAvailable read or OpDrain took.
	Value int64
	// PermitIDs are the ids of the permits a permit semaphore's OpAcquire took.
	PermitIDs []string
}
