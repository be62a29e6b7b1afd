-- raise_token.lua: raise the fencing-token counter of the lock N to at least a floor (RedLock).
-- KEYS[1]  the token counter redisson_lock_token:{N}
-- ARGV[1]  the floor
-- ARGV[2]  token expiry in milliseconds, or 0 when the counter is kept forever (see acquire.lua)
-- A RedLock holder raises the counters of the nodes it took to the highest token it got there, so
-- that the next holder, whose majority shares a node with this one's, gets a higher token. An expiring
-- counter is raised to the floor plus one, as issueToken leaves it after issuing the floor.
-- Returns the counter's value afterwards.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local wrong = wrongType({[1] = 'string'})
if wrong then
    return wrong
end
local floor = tonumber(ARGV[1])
local expiry = tonumber(ARGV[2])
local current = tonumber(redis.call('get', KEYS[1]) or '')
local t = redis.call('time')
if expiry ~= 0 then
    -- An expiring counter holds the value above the last token issued (issueToken keeps it for a
    -- local handoff): the floor, a token issued, is kept below it. One that is gone (or holds no
    -- integer) starts from the clock again when that is higher: tokens may have been issued from
    -- the clock since it expired.
    floor = floor + 1
    if not current then
        floor = math.max(floor, tonumber(t[1]) * 1000000 + tonumber(t[2]) + 1)
    end
end
current = current or 0
if current >= floor then
    return current
end
if expiry == 0 then
    redis.call('set', KEYS[1], string.format('%d', floor))
    return floor
end
-- A floor from another node may be ahead of this server's clock: the counter keeps it until this clock
-- has passed it by the expiry, as a token issued here would be kept.
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local keep = expiry + math.max(math.ceil((floor - now) / 1000), 0)
redis.call('set', KEYS[1], string.format('%d', floor), 'px', string.format('%d', keep))
return floor
