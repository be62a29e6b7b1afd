package redisops

import "strings"

// Message codes published on lock channels.
const (
	// UnlockMessage is published when a lock becomes free; it wakes one waiter.
	UnlockMessage = "0"
	// ReadUnlockMessage is published when a write hold of a read-write lock ends; it wakes all waiters.
	ReadUnlockMessage = "1"
)

// prefixed returns prefix:{name}, or prefix:name when name already carries a hash tag, so that the key
// lands in the same Redis Cluster slot as the lock key itself.
func prefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// LockKey returns the key of the lock hash for the lock name. It is the name itself.
func LockKey(name string) string { return name }

// ChannelName returns the pub/sub channel on which unlock notices for the lock name are published.
func ChannelName(name string) string { return prefixed("redisson_lock__channel", name) }

// TokenKey returns the key of the fencing token counter for the lock name.
func TokenKey(name string) string { return prefixed("redisson_lock_token", name) }

// WriteIntentKey returns the key of the write intent of the read-write lock name: a STRING holding the
// owner id of the writer that waits for the readers to leave, with an expiry, while which new readers
// are refused: lockwarden_write_intent:{N}. Redisson does not know this key.
func WriteIntentKey(name string) string { return prefixed("lockwarden_write_intent", name) }

// UnlockLatchKey returns the key that stores the answer of the release with the given request id.
func UnlockLatchKey(name, requestID string) string {
	return prefixed("redisson_unlock_latch", name) + ":" + requestID
}
