-- release.lua: retry-safe release of one hold of the reentrant lock N by owner O, with an optional
-- local handoff to a next owner in the same call.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock channel redisson_lock__channel:{N}
-- KEYS[3]  the unlock latch: with O's count known (ARGV[10] >= 0) O's own latch
--          redisson_unlock_latch:{N}:<O>, which holds the answer of O's last release; with the count
--          unknown the latch of this request, redisson_unlock_latch:{N}:<request id>
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
--          allowed), so that waiters in other processes get their turn; "2" to hand it off all the
--          same but count the listeners (the caller found none the last time it counted); "0" for
--          neither
-- ARGV[9]  token expiry in milliseconds, or 0 to keep the counter forever (see issueToken in lib.lua)
-- ARGV[10] O's hold count before this release as far as the caller knows, or -1 if unknown (an owner
--          id that other processes may use)
-- ARGV[11] with a known count, this release's sequence number: a decimal integer that is higher for
--          every release of O on N than for the one before (ignored with an unknown count)
-- ARGV[12] the fencing token of the next owner when the caller has already let it in (a local
--          handoff granted before this answer: the lock's latest token plus one, which the counter
--          kept unissued), or "0" for a token issued here. The counter is raised past it (to the
--          value above, kept in turn) whether or not the lock is handed off, so that no later token
--          equals it. When the counter is already above it (a RedLock floor), the lock is handed off
--          all the same (its next owner may be using it) with a token issued here, which tells the
--          caller to give it back
-- Returns {remaining, token}: remaining is O's hold count left (0 = released), -1 when O holds
-- nothing, or -2 when a release of O with a higher sequence number has already run (this call is a
-- late copy of an older one, and changes nothing). token is the next owner's fencing token when the
-- lock was handed off, else 0. A release that counted the channel's listeners (ARGV[8] "1" or "2",
-- with a next owner, when the lock became free) returns {remaining, token, listeners}.
--
-- Retries: go-redis sends a call again after a connection error, so the same release may run twice,
-- and the second run must answer what the first did, not release another hold or answer "not held".
-- A copy of the call may even arrive late, after its retry has run and the caller has gone on (a TCP
-- segment retransmitted on a connection go-redis gave up), and must then change nothing.
--   With the count known, O's own latch holds "<sequence>|<remaining>:<token>" of O's last release
--   (overwritten by each, so that a busy owner creates no key per release). A run that finds its own
--   sequence there is a retry and answers what is stored; one that finds a higher sequence is a late
--   copy and changes nothing. When the latch does not hold this release's answer (it expired; or a
--   copy of this release ran as release_fenced.lua, which writes no latch), a run of a release that
--   leaves holds and finds O's count already one below the caller's is taken for a copy that ran, and
--   answers that count (and stores it). The caller's count is otherwise at most O's count in Redis,
--   but for holds lost in ways that leave one fewer (a failover to a replica that lacked a re-entry, a
--   late copy of a release of a count no one knew): then too one fewer is the count the caller wants.
--   Otherwise, whatever O's count in Redis, one hold is released.
--   With the count unknown (an owner id that other processes may use, whose releases no one
--   sequences), the latch is the request's own, read first and written with the answer.
-- A key of another type than the lock keeps there (another lock's key taken as a lock name, or data
-- of the application) is refused before anything changes: the script touches only its own data. The
-- first command on each key (GET on the latch, HMGET on the lock, raiseTo or issueToken on the counter)
-- fails on a key of another type before anything is written.
local expected = tonumber(ARGV[10])
local known = expected >= 0
local seq = known and tonumber(ARGV[11])
local latched = redis.call('get', KEYS[3])
if latched then
    local answer = latched
    if known then
        local bar = string.find(latched, '|', 1, true)
        local last = bar and tonumber(string.sub(latched, 1, bar - 1))
        if last ~= seq then
            answer = nil
            if last and last > seq then
                return {-2, 0}
            end
        else
            answer = string.sub(latched, bar + 1)
        end
    end
    if answer then
        local sep = string.find(answer, ':', 1, true)
        return {tonumber(string.sub(answer, 1, sep - 1)), tonumber(string.sub(answer, sep + 1))}
    end
end
local state = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
if state[2] and state[1] then
    return kindRefusal(ARGV[2])
end
local proposed = (ARGV[12] or '0') ~= '0'
if proposed and not state[2] and ARGV[6] ~= '' and redis.call('hget', KEYS[1], ARGV[6]) and
        tonumber(redis.call('get', KEYS[4]) or '0') == tonumber(ARGV[12]) + 1 then
    -- O holds nothing, but the next owner holds the lock with the token given: an earlier copy of
    -- this release handed it over, and its latch has expired since. Answer what that copy did.
    return {0, tonumber(ARGV[12])}
end
local taken = not proposed or raiseTo(KEYS[4], ARGV[12], ARGV[9])
if known and expected > 1 and state[2] and tonumber(state[2]) == expected - 1 then
    -- The latch does not tell (see above), but O's count is already one below the caller's: a copy of
    -- this release has run before, and drops nothing more. The answer is stored, so that a later copy
    -- of this release finds it, and not a hold O took since.
    redis.call('set', KEYS[3], ARGV[11] .. '|' .. string.format('%d:0', expected - 1), 'px', ARGV[4])
    return {expected - 1, 0}
end
local remaining = state[2] and tonumber(state[2]) - 1 or -1
local token = 0
local listeners = -1
if remaining == 0 and ARGV[6] ~= '' and ARGV[8] ~= '0' then
    listeners = tonumber(redis.call('pubsub', ARGV[5] == 'spublish' and 'shardnumsub' or 'numsub', KEYS[2])[2])
end
if remaining < 0 then
    -- With the count known, the answer is stored even so, so that a late copy of this release finds
    -- it, and not a hold O took since. A release of a count no one knows leaves nothing.
    if not known then
        return {-1, 0}
    end
    remaining = -1
elseif remaining > 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], '-1')
    redis.call('pexpire', KEYS[1], ARGV[1])
elseif ARGV[6] ~= '' and (ARGV[8] ~= '1' or listeners <= 1) then
    token = taken and proposed and tonumber(ARGV[12]) or issueToken(KEYS[4], ARGV[9])
    redis.call('del', KEYS[1])
    redis.call('hset', KEYS[1], ARGV[6], '1')
    redis.call('pexpire', KEYS[1], ARGV[7])
else
    redis.call('del', KEYS[1])
    redis.call(ARGV[5], KEYS[2], ARGV[3])
end
local answer = string.format('%d:%d', remaining, token)
if known then
    answer = ARGV[11] .. '|' .. answer
end
redis.call('set', KEYS[3], answer, 'px', ARGV[4])
if listeners >= 0 then
    return {remaining, token, listeners}
end
return {remaining, token}
