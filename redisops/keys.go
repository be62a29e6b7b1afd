package redisops

import "strings"

// Message codes published on lock channels.
const (
	// UnlockMessage is published when a lock becomes free; it wakes one waiter.
	UnlockMessage = "0"
	// ReadUnlockMessage is published when a write hold of a read-write lock ends; it wakes all waiters.
	ReadUnlockMessage = "1"
)

// The prefixes of the keys and the channel made from a lock name (Redisson's).
const (
	channelPrefix = "redisson_lock__channel"
	tokenPrefix   = "redisson_lock_token"
	latchPrefix   = "redisson_unlock_latch"
)

// hashTag returns what goes around name in a key made from it: braces, so that the key lands in the
// same Redis Cluster slot as the lock key itself, or nothing when name already carries a hash tag.
func hashTag(name string) (open, closing string) {
	if strings.Contains(name, "{") {
		return "", ""
	}
	return "{", "}"
}

// prefixed returns prefix:{name}, or prefix:name when name already carries a hash tag (see hashTag).
func prefixed(prefix, name string) string {
	open, closing := hashTag(name)
	return prefix + ":" + open + name + closing
}

// LockKey returns the key of the lock hash for the lock name. It is the name itself.
func LockKey(name string) string { return name }

// ChannelName returns the pub/sub channel on which unlock notices for the lock name are published.
func ChannelName(name string) string { return prefixed(channelPrefix, name) }

// TokenKey returns the key of the fencing token counter for the lock name.
func TokenKey(name string) string { return prefixed(tokenPrefix, name) }

// WriteIntentKey returns the key of the write intent of the read-write lock name: a STRING holding the
// owner id of the writer that waits for the readers to leave, with an expiry, while which new readers
// are refused: lockwarden_write_intent:{N}. Redisson does not know this key.
func WriteIntentKey(name string) string { return prefixed("lockwarden_write_intent", name) }

// UnlockLatchKey returns the key that stores the answer of the release with the given request id.
func UnlockLatchKey(name, requestID string) string {
	open, closing := hashTag(name)
	return latchPrefix + ":" + open + name + closing + ":" + requestID
}

// Names are the keys and the channel of one lock name, built once, for a caller that calls on the
// same name often (a lock actor): the calls that take them build no key of their own but the unlock
// latch's. Make them with NamesOf, and do not change them after.
type Names struct {
	// Name is the lock name, which is also the key of its hash ([LockKey]).
	Name string
	// Token is [TokenKey] and Channel [ChannelName] of Name.
	Token, Channel string
	// latch is the unlock latch's key less the request id.
	latch string
	// name, token and channel are Name, Token and Channel as command arguments, boxed once rather
	// than on every call (see boxed).
	name, token, channel any
}

// boxed returns Name, Token and Channel as command arguments: as NamesOf boxed them, or, in Names
// made otherwise, boxed now.
func (n *Names) boxed() (name, token, channel any) {
	if n.name != nil {
		return n.name, n.token, n.channel
	}
	return n.Name, n.Token, n.Channel
}

// NamesOf returns the Names of the lock name.
func NamesOf(name string) Names {
	// The three keys made from name share one allocation: each is a substring of one string (a lock
	// actor bound to a name never used before makes them for that name).
	open, closing := hashTag(name)
	each := len(":") + len(open) + len(name) + len(closing) // after each prefix
	var b strings.Builder
	b.Grow(len(tokenPrefix) + len(channelPrefix) + len(latchPrefix) + 3*each + 1)
	for _, prefix := range [...]string{tokenPrefix, channelPrefix, latchPrefix} {
		b.WriteString(prefix)
		b.WriteString(":")
		b.WriteString(open)
		b.WriteString(name)
		b.WriteString(closing)
	}
	b.WriteString(":")
	keys := b.String()
	endToken := len(tokenPrefix) + each
	endChannel := endToken + len(channelPrefix) + each
	n := Names{Name: name, Token: keys[:endToken], Channel: keys[endToken:endChannel], latch: keys[endChannel:]}
	n.name, n.token, n.channel = n.Name, n.Token, n.Channel
	return n
}

// latchKey returns [UnlockLatchKey] of the name and requestID.
func (n *Names) latchKey(requestID string) string { return n.latch + requestID }
