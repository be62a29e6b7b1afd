-- renew.lua: extend the lease of the reentrant lock N while owner O holds it (the watchdog).
-- KEYS[1]  the lock hash N
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id O
-- Returns 1 when renewed, 0 when O no longer holds the lock (the hold is lost).
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
