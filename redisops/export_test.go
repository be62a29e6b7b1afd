package redisops

// QueuedCalls returns the number of calls waiting in b for a free round trip.
func QueuedCalls(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// BatcherOf returns the batcher through which o's script calls reach Redis.
func BatcherOf(o *Ops) *Batcher { return o.batcher }

// AcquireSource and ReleaseSource are the sources of acquire.lua and release.lua as loaded, with
// lib.lua ahead of them.
var AcquireSource, ReleaseSource = withLib(acquireSource), withLib(releaseSource)

// TokenArg is the token expiry argument o passes to the scripts.
func TokenArg(o *Ops) any { return o.tokenArg() }
