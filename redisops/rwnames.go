package redisops

import "fmt"

// RWNames are the keys and the channel of one read-write lock name, built and boxed as command
// arguments once, for a caller that calls on the same name often (a lock actor), and the keys of the
// readers it has seen, built once per reader: a read acquire or release through them builds no key
// and boxes none of them again. Make them with RWNamesOf; the calls that take an RWNames answer
// ErrBadArgument for one made otherwise (or nil). An RWNames is for one goroutine at a time: its
// readers' keys are cached as they are first asked for.
type RWNames struct {
	// lock is the lock name, which is also the key of its hash ([LockKey]); channel its
	// [RWChannelName].
	lock, channel string
	// lockArg, channelArg, intentArg and allReadersArg are the hash's key, [RWChannelName],
	// [WriteIntentKey] and the prefix of every reader's timeout keys (allReadersPrefix), boxed.
	lockArg, channelArg, intentArg, allReadersArg any
	// latch is the unlock latch's key less the request id (or owner).
	latch string
	// readers caches the keys of the readers seen, when cache is set (see reader).
	readers map[string]*readerNames
	cache   bool
}

// readerNames are the keys and fields of one reader (owner) of a read-write lock, boxed.
type readerNames struct {
	owner, writeField, timeouts, latch any
}

// maxCachedReaders bounds the readers whose keys an RWNames keeps: past it the cache starts over, so
// that a lock read by ever new owners does not grow it without end.
const maxCachedReaders = 1024

// RWNamesOf returns the RWNames of the read-write lock name.
func RWNamesOf(name string) *RWNames {
	n := rwNamesOnce(name)
	n.cache = true
	return n
}

// rwNamesOnce returns the RWNames of name for a call or two: it keeps no reader's keys.
func rwNamesOnce(name string) *RWNames {
	n := &RWNames{lock: name, channel: RWChannelName(name), latch: UnlockLatchKey(name, "")}
	n.lockArg, n.channelArg = LockKey(name), n.channel
	n.intentArg, n.allReadersArg = WriteIntentKey(name), allReadersPrefix(name)
	return n
}

// Name returns the lock name.
func (n *RWNames) Name() string { return n.lock }

// Channel returns [RWChannelName] of the lock name.
func (n *RWNames) Channel() string { return n.channel }

// check returns ErrBadArgument for names not made by RWNamesOf.
func (n *RWNames) check() error {
	if n == nil || n.lockArg == nil {
		return fmt.Errorf("%w: read-write lock names not made by RWNamesOf", ErrBadArgument)
	}
	return nil
}

// reader returns the keys of owner, built on first use and, in names from RWNamesOf, kept.
func (n *RWNames) reader(owner string) *readerNames {
	if r := n.readers[owner]; r != nil {
		return r
	}
	r := &readerNames{owner: owner, writeField: WriteField(owner), timeouts: readTimeoutPrefix(n.lock, owner),
		latch: n.latch + owner}
	if n.cache {
		if n.readers == nil || len(n.readers) >= maxCachedReaders {
			n.readers = make(map[string]*readerNames)
		}
		n.readers[owner] = r
	}
	return r
}
