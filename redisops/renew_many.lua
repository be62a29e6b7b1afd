-- renew_many.lua: extend many watchdog holds in one call, each as renew.lua, rw_read_renew.lua or
-- rw_write_renew.lua would, and each on its own: one hold's refusal leaves the others renewed.
-- For hold i = 1, 2, ... (every key of one call in one Redis Cluster slot):
-- KEYS[2i-1]  the lock hash N
-- KEYS[2i]    for read holds, O's read timeout key prefix {N}:O:rwlock_timeout (hold k has the key
--             <prefix>:<k>); for the other kinds, N again
-- ARGV[3i-2]  the kind: 'l' (reentrant or fair lock), 'r' (O's read holds), 'w' (O's write hold)
-- ARGV[3i-1]  lease in milliseconds
-- ARGV[3i]    owner id O
-- Returns one integer per hold, in order: 1 when renewed; 0 when O no longer holds it (the hold is
-- lost); -1 when N holds another type than a hash (WRONGTYPE); -2 when O's field in N belongs to the
-- other family of locks (WRONGKIND, see kindMismatch in lib.lua). A hold that does not answer 1 is
-- left unchanged.
local out = {}
for i = 1, #ARGV / 3 do
    local key, prefix = KEYS[2 * i - 1], KEYS[2 * i]
    local kind, lease, owner = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1]), ARGV[3 * i]
    local t = redis.call('type', key).ok
    local r = 0
    if t ~= 'hash' and t ~= 'none' then
        r = -1
    elseif t == 'hash' then
        if kind == 'l' then
            local state = redis.call('hmget', key, 'mode', owner)
            if state[2] and state[1] then
                r = -2
            elseif state[2] then
                redis.call('pexpire', key, lease)
                r = 1
            end
        elseif kind == 'w' then
            local state = redis.call('hmget', key, 'mode', owner .. ':write', owner)
            if state[3] and not state[1] then
                r = -2
            elseif state[1] == 'write' and state[2] then
                if not state[3] or redis.call('pttl', key) < lease then
                    redis.call('pexpire', key, lease)
                end
                r = 1
            end
        elseif kind == 'r' then
            local state = redis.call('hmget', key, 'mode', owner)
            local count = tonumber(state[2])
            if count and not state[1] then
                r = -2
            elseif count then
                r = 1
                for k = 1, count do
                    if redis.call('type', prefix .. ':' .. k).ok ~= 'string' then
                        r = 0
                        break
                    end
                end
                if r == 1 then
                    for k = 1, count do
                        redis.call('pexpire', prefix .. ':' .. k, lease)
                    end
                    if redis.call('pttl', key) < lease then
                        redis.call('pexpire', key, lease)
                    end
                end
            end
        end
    end
    out[i] = r
end
return out
