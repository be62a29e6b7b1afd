-- rw_clear_intent.lua: withdraw the write intent of owner O, a waiting writer that gave up, on the
-- read-write lock N.
-- KEYS[1]  the write intent lockwarden_write_intent:{N}
-- ARGV[1]  owner id O
-- The intent is deleted only if it holds O; another writer's intent is left alone.
-- Returns 1 when O's intent was deleted, 0 otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    return 1
end
return 0
