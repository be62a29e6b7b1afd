-- status.lua: a consistent snapshot of the lock N as seen by owner O.
-- KEYS[1]  the lock hash N
-- ARGV[1]  owner id O (may be "")
-- Returns {locked (0 or 1), O's hold count, pttl in milliseconds (-2 when absent, -1 without expiry)}.
local count = 0
if ARGV[1] ~= '' then
    count = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0') or 0
end
return {redis.call('exists', KEYS[1]), count, redis.call('pttl', KEYS[1])}
