-- rw_status.lua: a consistent snapshot of the read-write lock N as seen by owner O.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the write intent lockwarden_write_intent:{N}
-- ARGV[1]  owner id O (may be "")
-- ARGV[2]  O's write field O:write
-- Returns {mode ("", "read" or "write"), O's read count, O's write count,
-- pttl in milliseconds (-2 when absent, -1 without expiry), the write intent's owner id or ""}.
local reads, writes = 0, 0
local mode = redis.call('hget', KEYS[1], 'mode') or ''
if ARGV[1] ~= '' then
    local state = redis.call('hmget', KEYS[1], ARGV[1], ARGV[2])
    reads = tonumber(state[1] or '0') or 0
    writes = tonumber(state[2] or '0') or 0
end
return {mode, reads, writes, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or ''}
