-- latch_count_down.lua: Redisson's RCountDownLatch.countDown(), retry-safe: take one from the count of
-- the latch N.
-- KEYS[1]  the latch N, a STRING holding the decimal count
-- KEYS[2]  the channel redisson_countdownlatch__channel__{N}
-- KEYS[3]  the retry latch lockwarden_retry_latch:{N}:<request id>
-- ARGV[1]  the zero message ("0")
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub), or "" when the caller
--          publishes itself (the channel is in another Cluster slot: KEYS[2] is then N again)
-- ARGV[3]  the retry latch expiry in ms, or 0 when the call carries no request id (no retry latch)
-- DECR N; when that leaves 0 or less, DEL N; when it leaves exactly 0, publish the zero message (a
-- count-down of an absent latch publishes nothing). Returns the count left, 0 when N is gone.
-- Retries: with a retry latch, a run that finds it returns the answer stored there and changes
-- nothing (a retried count-down does not count twice); otherwise it stores its answer there. The GET
-- and the DECR fail on a key of another type before anything is written (WRONGTYPE).
local latched = tonumber(ARGV[3]) > 0
if latched then
    local answer = redis.call('get', KEYS[3])
    if answer then
        return tonumber(answer)
    end
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then redis.call('del', KEYS[1]) end
if v == 0 and ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
local left = v > 0 and v or 0
if latched then
    redis.call('set', KEYS[3], left, 'px', ARGV[3])
end
if v == 0 and ARGV[2] == '' then
    return -1 -- reached zero: the caller publishes the zero message
end
return left
