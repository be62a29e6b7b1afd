-- forceunlock.lua: free the lock N whoever holds it, and wake the waiters.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock channel redisson_lock__channel:{N}
-- ARGV[1]  message published when something was deleted ("0")
-- ARGV[2]  publish command ("publish" or "spublish")
-- Returns 1 when a lock was deleted, 0 when the lock was free.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data.
local refused = wrongType({[1] = 'hash'}) or familyMismatch(false)
if refused then
    return refused
end
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
