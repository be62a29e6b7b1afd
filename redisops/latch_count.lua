-- latch_count.lua: Redisson's RCountDownLatch.getCount(): the count of the latch N, 0 when absent.
-- KEYS[1]  the latch N, a STRING holding the decimal count
-- Changes nothing. The GET fails on a key of another type (WRONGTYPE).
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
return tonumber(value)
