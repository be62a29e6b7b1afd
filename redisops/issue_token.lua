-- issue_token.lua: the function that issues a fencing token, prepended to every script that issues one
-- (acquire.lua, release.lua, fair_acquire.lua, fair_release.lua, rw_write_acquire.lua; see withTokens
-- in token.go).
-- issueToken(key, expiry) issues a token on the counter key (redisson_lock_token:{N}). With a token
-- expiry of 0 the counter is INCRed and kept forever (Redisson's RFencedLock). Otherwise the token is the
-- larger of the counter plus one and the server's clock in microseconds, and the counter keeps it until
-- the clock has passed it by the expiry (in ms), so that a name leaves no key behind, and a token issued
-- after the counter expired (from the clock) is still above every earlier one.
local function issueToken(key, expiry)
    if expiry == 0 then
        local token = redis.call('incr', key)
        redis.call('persist', key)
        return token
    end
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local token = math.max(tonumber(redis.call('get', key) or '0') + 1, now)
    local keep = expiry + math.ceil((token - now) / 1000)
    redis.call('set', key, string.format('%d', token), 'px', string.format('%d', keep))
    return token
end
