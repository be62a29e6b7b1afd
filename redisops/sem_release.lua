-- sem_release.lua: Redisson's RSemaphore.release(n), retry-safe: give n permits back to the semaphore
-- N (INCRBY, which creates N from 0 when absent; no check of who took them, as in Redisson).
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the channel redisson_sc:{N}
-- KEYS[3]  the retry latch lockwarden_retry_latch:{N}:<request id>
-- ARGV[1]  the permits n
-- ARGV[2]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[3]  the latch expiry in ms, or 0 when the call carries no request id (no latch)
-- Returns the new count, which it publishes on the channel.
-- Retries: with a latch, a run that finds the latch returns the answer stored there and changes
-- nothing (a retried release gives nothing back twice); otherwise it stores its answer there. The
-- latch GET and the INCRBY fail on a key of another type before anything is written (WRONGTYPE).
local latched = tonumber(ARGV[3]) > 0
if latched then
    local answer = redis.call('get', KEYS[3])
    if answer then
        return tonumber(answer)
    end
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
if latched then
    redis.call('set', KEYS[3], value, 'px', ARGV[3])
end
return value
