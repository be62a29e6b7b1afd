-- rw_read_renew.lua: extend the read holds of owner O on the read-write lock N (the watchdog).
-- KEYS[1]  the lock hash N
-- KEYS[2]  O's read timeout key prefix {N}:O:rwlock_timeout (hold k has the key <prefix>:<k>)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id O
-- Resets each of O's timeout keys to the lease and raises the hash's expiry to the lease if shorter.
-- Returns 1 when renewed, 0 when O holds no read hold or one of its holds ran out (the holds are
-- lost); nothing is changed then.
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if not count then
    return 0
end
-- Key names are built with string.format: Lua turns a number concatenated to a string into text with a
-- floating-point printf.
for k = 1, count do
    if redis.call('type', KEYS[2] .. ':' .. string.format('%d', k)).ok ~= 'string' then
        return 0
    end
end
for k = 1, count do
    redis.call('pexpire', KEYS[2] .. ':' .. string.format('%d', k), ARGV[1])
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return 1
