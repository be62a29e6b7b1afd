-- rw_write_renew.lua: extend the write lock of owner O on the read-write lock N (the watchdog).
-- KEYS[1]  the lock hash N
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  O's write field O:write
-- ARGV[3]  O's read field O
-- Sets the hash's expiry to the lease, so that the time write re-entries added (pttl + lease each, as
-- Redisson's) does not pile up: a writer that dies frees the lock within one lease of its last renewal.
-- When O also holds read holds (a downgrade), it only raises the expiry: they may need longer.
-- Returns 1 when renewed, 0 when O is not the writer (the hold is lost).
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2], ARGV[3])
if state[1] ~= 'write' or not state[2] then
    return 0
end
if not state[3] or redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
return 1
