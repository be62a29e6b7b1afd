-- rw_forceunlock.lua: free the read-write lock N, whoever holds it, when it is in the given mode, and
-- wake the waiters.
-- KEYS[1]  the lock hash N (field mode = read|write, field R -> read count, field W:write -> write count)
-- KEYS[2]  the channel redisson_rwlock:{N}
-- ARGV[1]  the mode to free: "read" or "write"; a lock in the other mode is left alone
-- ARGV[2]  message published when something was deleted ("0" for read, "1" for write)
-- ARGV[3]  publish command ("publish" or "spublish")
-- ARGV[4]  the timeout key prefix of all readers, {N}: ; reader R's k-th hold has the key
--          <prefix>R:rwlock_timeout:<k>. These keys cannot be listed in KEYS since only the hash knows
--          the readers; they are built here, as Redisson does, and share the hash tag {N}, so they live
--          in the lock's Redis Cluster slot. They are deleted with the hash (for the writer's field
--          W:write there are none, and deleting absent keys is harmless).
-- Returns 1 when the lock was deleted, 0 when it was free or in the other mode.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local refused = wrongType({[1] = 'hash'}) or familyMismatch(true)
if refused then
    return refused
end
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then
    return 0
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local field, count = fields[i], tonumber(fields[i + 1])
    if field ~= 'mode' and count then
        for k = 1, count do
            -- Only a hold's string: a lock may be named like the key.
            local key = ARGV[4] .. field .. ':rwlock_timeout:' .. string.format('%d', k)
            if redis.call('type', key).ok == 'string' then
                redis.call('del', key)
            end
        end
    end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[2])
return 1
