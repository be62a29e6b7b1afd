-- rw_write_renew.lua: extend the write lock of owner O on the read-write lock N (the watchdog).
-- KEYS[1]  the lock hash N
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  O's write field O:write
-- Raises the hash's expiry to the lease if it is shorter (O's downgraded read holds may need longer).
-- Returns 1 when renewed, 0 when O is not the writer (the hold is lost).
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
if state[1] ~= 'write' or not state[2] then
    return 0
end
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return 1
