-- sem_acquire.lua: Redisson's RSemaphore.tryAcquire(n), retry-safe: take n permits of the semaphore N
-- if that many are available.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- KEYS[2]  the retry latch lockwarden_retry_latch:{N}:<request id>
-- ARGV[1]  the permits n
-- ARGV[2]  the latch expiry in ms, or 0 when the call carries no request id (no latch)
-- Returns 1 when the permits were taken (DECRBY), 0 when fewer than n are available or N is absent.
-- Publishes nothing.
-- Retries: with a latch, a run that finds the latch returns the answer stored there and changes
-- nothing (a retried acquisition takes no permits twice); otherwise it stores its answer there, a
-- refusal too (so that a late copy of a refused call, arriving after its retry, takes nothing). The
-- GETs fail on a key of another type before anything is written (WRONGTYPE).
local latched = tonumber(ARGV[2]) > 0
if latched then
    local answer = redis.call('get', KEYS[2])
    if answer then
        return tonumber(answer)
    end
end
local acquired = 0
local value = redis.call('get', KEYS[1])
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    redis.call('decrby', KEYS[1], ARGV[1])
    acquired = 1
end
if latched then
    redis.call('set', KEYS[2], acquired, 'px', ARGV[2])
end
return acquired
