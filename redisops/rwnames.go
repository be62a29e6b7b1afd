package redisops

// RWNames are the keys and the channel of one read-write lock name, built and boxed as command
// arguments once, for a caller that calls on the same name often (a lock actor), and the keys of the
// readers it has seen, built once per reader: a read acquire or release through them builds no key
// and boxes none of them again. Make them with RWNamesOf. An RWNames is for one goroutine at a time:
// its readers' keys are cached as they are first asked for.
type RWNames struct {
	// Name is the lock name, which is also the key of its hash ([LockKey]).
	Name string
	// Channel is [RWChannelName] of Name.
	Channel string
	// name, channel, intent and allReaders are the hash's key, [RWChannelName], [WriteIntentKey] and
	// the prefix of every reader's timeout keys (allReadersPrefix), boxed.
	name, channel, intent, allReaders any
	// latch is the unlock latch's key less the request id (or owner).
	latch   string
	readers map[string]*readerNames
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
	n := &RWNames{Name: name, Channel: RWChannelName(name), name: LockKey(name),
		intent: WriteIntentKey(name), allReaders: allReadersPrefix(name), latch: UnlockLatchKey(name, "")}
	n.channel = n.Channel
	return n
}

// reader returns the keys of owner, built and cached on first use.
func (n *RWNames) reader(owner string) *readerNames {
	if r := n.readers[owner]; r != nil {
		return r
	}
	if n.readers == nil || len(n.readers) >= maxCachedReaders {
		n.readers = make(map[string]*readerNames)
	}
	r := &readerNames{owner: owner, writeField: WriteField(owner), timeouts: readTimeoutPrefix(n.Name, owner),
		latch: n.latch + owner}
	n.readers[owner] = r
	return r
}
