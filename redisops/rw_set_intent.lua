-- rw_set_intent.lua: leave or refresh the write intent of owner O, a writer waiting behind readers of
-- its own process (which it does not ask Redis about), on the read-write lock N.
-- KEYS[1]  the lock hash N (field mode = read|write)
-- KEYS[2]  the write intent lockwarden_write_intent:{N}
-- ARGV[1]  owner id O
-- ARGV[2]  write intent expiry in milliseconds
-- As rw_write_acquire.lua's refusal does: while the lock is in read mode, the intent is set to O with
-- that expiry, or its expiry refreshed when it already holds O; another owner's intent is left alone.
-- Returns 1 when the intent holds O, 0 otherwise.
if redis.call('hget', KEYS[1], 'mode') ~= 'read' then
    return 0
end
local holder = redis.call('get', KEYS[2])
if holder and holder ~= ARGV[1] then
    return 0
end
redis.call('set', KEYS[2], ARGV[1], 'px', ARGV[2])
return 1
