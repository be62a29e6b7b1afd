-- sem_drain.lua: Redisson's RSemaphore.drainPermits(), retry-safe: take every available permit of the
-- semaphore N.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the retry latch lockwarden_retry_latch:{N}:<request id>
-- ARGV[1]  the latch expiry in ms, or 0 when the call carries no request id (no latch)
-- Returns the count N held (0 when absent, and N is then not created), and SETs N to 0 (like
-- Redisson's, which drops any expiry N had). Publishes nothing.
-- Retries: with a latch, a run that finds the latch returns the answer stored there and changes
-- nothing; otherwise it stores its answer there. The GETs fail on a key of another type before
-- anything is written (WRONGTYPE).
local latched = tonumber(ARGV[1]) > 0
if latched then
    local answer = redis.call('get', KEYS[2])
    if answer then
        return tonumber(answer)
    end
end
local value = redis.call('get', KEYS[1])
local drained = 0
if value ~= false then
    redis.call('set', KEYS[1], 0)
    drained = tonumber(value)
end
if latched then
    redis.call('set', KEYS[2], value or 0, 'px', ARGV[1])
end
return drained
