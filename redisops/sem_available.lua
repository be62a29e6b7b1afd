-- sem_available.lua: Redisson's RSemaphore.availablePermits(): the available permits of the semaphore
-- N, 0 when N is absent.
-- KEYS[1]  the semaphore N, a STRING holding the decimal count of available permits
-- Changes nothing. The GET fails on a key of another type (WRONGTYPE).
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
return tonumber(value)
