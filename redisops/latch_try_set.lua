-- latch_try_set.lua: Redisson's RCountDownLatch.trySetCount(c): set the count of the latch N if it has
-- none.
-- KEYS[1]  the latch N, a STRING holding the decimal count
-- KEYS[2]  the channel redisson_countdownlatch__channel__{N}
-- ARGV[1]  the new-count message ("1")
-- ARGV[2]  the count c
-- ARGV[3]  publish command ("publish", or "spublish" for sharded pub/sub), or "" when the caller
--          publishes itself (the channel is in another Cluster slot: KEYS[2] is then N again)
-- KEYS[3]  the retry latch lockwarden_retry_latch:{N}:<request id>
-- ARGV[4]  the latch expiry in ms, or 0 when the call carries no request id (no latch)
-- Returns 1 when N was set (the new-count message is then published), 0 when N existed. A key of
-- another type is refused (WRONGTYPE), where Redisson's script answers 0.
-- Retries: with a latch, a run that finds it returns the answer stored there and changes nothing;
-- otherwise it stores its answer there.
local refused = wrongType({[1] = 'string'})
if refused then
    return refused
end
local latched = tonumber(ARGV[4]) > 0
if latched then
    local answer = redis.call('get', KEYS[3])
    if answer then
        return tonumber(answer)
    end
end
local set = 0
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    if ARGV[3] ~= '' then redis.call(ARGV[3], KEYS[2], ARGV[1]) end
    set = 1
end
if latched then
    redis.call('set', KEYS[3], set, 'px', ARGV[4])
end
return set
