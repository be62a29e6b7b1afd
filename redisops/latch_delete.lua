-- latch_delete.lua: Redisson's RCountDownLatch.delete(): delete the latch N.
-- KEYS[1]  the latch N, a STRING holding the decimal count
-- KEYS[2]  the channel redisson_countdownlatch__channel__{N}
-- ARGV[1]  the new-count message ("1")
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub), or "" when the caller
--          publishes itself (the channel is in another Cluster slot: KEYS[2] is then N again)
-- Returns 1 when N was deleted (the new-count message is then published, as Redisson does: awaiters
-- are not woken), 0 when N was absent. A key of another type is refused before anything changes
-- (WRONGTYPE), where Redisson's script would delete it.
local refused = wrongType({[1] = 'string'})
if refused then
    return refused
end
if redis.call('del', KEYS[1]) == 1 then
    if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
    return 1
else
    return 0
end
