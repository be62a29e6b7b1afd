-- raise_token.lua: raise the fencing-token counter of the lock N to at least a floor (RedLock).
-- KEYS[1]  the token counter redisson_lock_token:{N}
-- ARGV[1]  the floor
-- A RedLock holder raises the counters of the nodes it took to the highest token it got there, so
-- that the next holder, whose majority shares a node with this one's, gets a higher token.
-- Returns the counter's value afterwards.
local floor = tonumber(ARGV[1])
local current = tonumber(redis.call('get', KEYS[1]) or '0')
if current < floor then
    redis.call('set', KEYS[1], floor)
    return floor
end
return current
