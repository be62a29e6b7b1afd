-- release.lua: retry-safe release of one hold of the reentrant lock N by owner O, with an optional
-- local handoff to a next owner in the same call.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock channel redisson_lock__channel:{N}
-- KEYS[3]  the unlock latch redisson_unlock_latch:{N}:<request id>
-- KEYS[4]  the fencing token counter redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds to keep when holds remain
-- ARGV[2]  owner id O
-- ARGV[3]  message published when the lock becomes free ("0")
-- ARGV[4]  latch expiry in milliseconds
-- ARGV[5]  publish command ("publish", or "spublish" for sharded pub/sub)
-- ARGV[6]  next owner to hand the lock to when it becomes free, or "" for none
-- ARGV[7]  lease in milliseconds for the next owner
-- ARGV[8]  "1" when the caller's budget of handoffs in a row is spent: then the lock is handed off
--          only if no other client listens on the channel (the caller's own subscription is the one
--          allowed), so that waiters in other processes get their turn
-- ARGV[9]  token expiry in milliseconds, or 0 to keep the counter forever (see issueToken in lib.lua)
-- ARGV[10] O's hold count before this release as far as the caller knows, or -1 if unknown (an owner
--          id that other processes may use)
-- Returns {remaining, token}: remaining is O's hold count left (0 = released), or -1 when O holds
-- nothing. token is the next owner's fencing token when the lock was handed off, else 0.
--
-- Retries: go-redis sends a call again after a connection error, so the same release (same request id)
-- may run twice, and the second run must answer what the first did, not release another hold or
-- answer "not held". With the count known (E = ARGV[10]):
--   O counts E > 1: the first run, which releases one hold and needs no latch, unless the latch holds
--     an answer (a retry of a run that found E + 1: see below).
--   O counts E - 1 >= 1: a retry of that release, which ran; it answers E - 1 and changes nothing.
--   E = 1, O counts 1 and no next owner: the last release. It frees the lock and stores its answer in
--     the latch, with setGet (SET ... GET), which also reads any earlier answer: a retry finds O's
--     field gone, as it would if the hold had been lost (expired, force-unlocked) before the first
--     run, and only the latch tells the two apart.
-- Anything else (O's field gone, a count the caller did not expect, a handoff, or no count known)
-- reads the latch first and returns the answer stored there, and stores its own answer there.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data. The
-- first command on each key (HMGET on the lock, GET or setGet on the latch, issueToken on the
-- counter) fails on a key of another type before anything is written.
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
if state[2] and state[1] then
    return kindRefusal(ARGV[2])
end
local held = state[2] and tonumber(state[2])
local expected = tonumber(ARGV[10])
local latched
if held and held == expected then
    if held > 1 then
        latched = redis.call('get', KEYS[3])
        if not latched then
            redis.call('hincrby', KEYS[1], ARGV[2], -1)
            redis.call('pexpire', KEYS[1], ARGV[1])
            return {held - 1, 0}
        end
    elseif ARGV[6] == '' then
        latched = setGet(KEYS[3], '0:0', ARGV[4])
        if not latched then
            redis.call('del', KEYS[1])
            redis.call(ARGV[5], KEYS[2], ARGV[3])
            return {0, 0}
        end
        redis.call('set', KEYS[3], latched, 'px', ARGV[4])
    end
elseif held and expected > 0 and held == expected - 1 then
    return {held, 0}
end
latched = latched or redis.call('get', KEYS[3])
if latched then
    local sep = string.find(latched, ':', 1, true)
    return {tonumber(string.sub(latched, 1, sep - 1)), tonumber(string.sub(latched, sep + 1))}
end
if not held then
    return {-1, 0}
end
local remaining = held - 1
if remaining > 0 then
    redis.call('set', KEYS[3], string.format('%d:0', remaining), 'px', ARGV[4])
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {remaining, 0}
end
if ARGV[6] ~= '' and (ARGV[8] ~= '1' or tonumber(redis.call('pubsub',
        ARGV[5] == 'spublish' and 'shardnumsub' or 'numsub', KEYS[2])[2]) <= 1) then
    local token = issueToken(KEYS[4], tonumber(ARGV[9]))
    redis.call('set', KEYS[3], string.format('0:%d', token), 'px', ARGV[4])
    redis.call('del', KEYS[1])
    redis.call('hset', KEYS[1], ARGV[6], 1)
    redis.call('pexpire', KEYS[1], ARGV[7])
    return {0, token}
end
redis.call('set', KEYS[3], '0:0', 'px', ARGV[4])
redis.call('del', KEYS[1])
redis.call(ARGV[5], KEYS[2], ARGV[3])
return {0, 0}
