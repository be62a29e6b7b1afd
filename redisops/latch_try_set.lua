-- latch_try_set.lua: Redisson's RCountDownLatch.trySetCount(c): set the count of the latch N if it has
-- none.
-- KEYS[1]  the latch N, a STRING holding the decimal count
-- KEYS[2]  the channel redisson_countdownlatch__channel__{N}
-- ARGV[1]  the new-count message ("1")
-- ARGV[2]  the count c
-- ARGV[3]  publish command ("publish", or "spublish" for sharded pub/sub), or "" when the caller
--          publishes itself (the channel is in another Cluster slot: KEYS[2] is then N again)
-- Returns 1 when N was set (the new-count message is then published), 0 when N existed. A key of
-- another type is refused (WRONGTYPE), where Redisson's script answers 0.
local refused = wrongType({[1] = 'string'})
if refused then
    return refused
end
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    if ARGV[3] ~= '' then redis.call(ARGV[3], KEYS[2], ARGV[1]) end
    return 1
else
    return 0
end
