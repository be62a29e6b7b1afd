-- forceunlock.lua: free the lock N whoever holds it, and wake the waiters.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock channel redisson_lock__channel:{N}
-- ARGV[1]  message published when something was deleted ("0")
-- ARGV[2]  publish command ("publish" or "spublish")
-- Returns 1 when a lock was deleted, 0 when the lock was free.
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
