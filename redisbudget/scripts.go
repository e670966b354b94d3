package redisbudget

import "github.com/redis/go-redis/v9"

// The scripts share these helpers. Every key of one API key lives under
// KEYS[1], a prefix with a {hash tag}, so that a cluster keeps them in one
// slot. Times are Redis TIME in milliseconds: the machines' clocks do not
// matter. Durations cross the wire as milliseconds, rates as per second.
//
// A failover may bring a primary whose clock differs from the old one's.
// A refill time stored ahead of TIME is set to now, so that a clock behind
// stalls no refill; a clock ahead ends leases early by the difference,
// which the client's renewals (a third of the lease time at the most)
// make good unless it exceeds most of the lease time.
const luaPrelude = `
local p = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep = 86400000

-- num is a stored number, or d when the field is missing or holds no
-- finite number (a key edited by hand, or damaged): no stored value fails
-- a script, and none holds a level for ever.
local function num(x, d)
  local v = tonumber(x)
  if v == nil or v ~= v or v == math.huge or v == -math.huge then return d end
  return v
end

-- add adds d to field f of hash k and returns the sum; a field that holds
-- no number counts as 0, where HINCRBYFLOAT would fail the script after
-- what it had written.
local function add(k, f, d)
  local v = num(redis.call('HGET', k, f), 0) + d
  redis.call('HSET', k, f, tostring(v))
  return v
end

local function touch(k)
  redis.call('PEXPIRE', k, keep)
end

-- tokens_of is what level l holds now: its tokens ('t' at 'a') refilled
-- at its rate up to its size, and once its moment ('m', when the server
-- said it frees more) has come, what that refill has not brought of one
-- unit ('mu'). A level that a process showed to free in steps (rate 0
-- with a window) does not refill for a window after ('sw'), whatever
-- rate others give: the processes that share it learn its shape one by
-- one; nor does one whose word said so (steps) until its moment. A level the store has no count of (new, or Redis came back
-- empty) starts at what the asking process's model holds (its size less
-- 'taken'); when that is less than full, its log bounds it only from
-- the server's next word on it (a Left) or a window later ('nb'): an
-- empty log says nothing of what was taken before the store had it. It
-- returns the tokens, the rate they refill at, the moment while it is
-- still to come, and whether the count began now.
local function tokens_of(l)
  local k = p .. ':lv:' .. l.name
  local h = redis.call('HMGET', k, 't', 'a', 'm', 'sw', 'mu')
  local rate, sw = l.rate, num(h[4], 0)
  if rate == 0 and l.window > 0 then
    sw = now + l.window
    redis.call('HSET', k, 'sw', sw)
  elseif sw > now then
    rate = 0
  end
  local tokens, fresh = num(h[1]), false
  if not tokens then
    fresh = true
    tokens = math.max(0, l.size - l.taken)
    redis.call('HSET', k, 't', tostring(tokens), 'a', now, 'ia', now)
    if l.taken > 0 then redis.call('HSET', k, 'nb', now + l.window) end
    touch(k)
  end
  local at = num(h[2], now)
  if at > now then
    at = now
    redis.call('HSET', k, 'a', now)
  end
  local from = math.max(at, sw)
  if now > from then tokens = tokens + rate * (now - from) / 1000 end
  -- No call leaves a level deeper in debt than its size (a call bigger
  -- than the level leaves less).
  tokens = math.max(math.min(l.size, tokens), -l.size)
  local m = num(h[3])
  if m and m <= now then
    tokens = math.min(tokens + num(h[5], 1), math.max(l.size, tokens))
    redis.call('HSET', k, 't', tostring(tokens), 'a', now)
    redis.call('HDEL', k, 'm', 'mu')
    m = nil
  end
  return tokens, rate, m, fresh
end

-- begun_since reports whether the store began its count of level l
-- ('ia') after what l gives back or takes happened (l.ago), or now
-- (fresh, from tokens_of): the model it began from had it.
local function begun_since(l, fresh)
  local ia = num(redis.call('HGET', p .. ':lv:' .. l.name, 'ia'), -1)
  return fresh or ia > now - l.ago
end

local function save(name, tokens)
  local k = p .. ':lv:' .. name
  redis.call('HSET', k, 't', tostring(tokens), 'a', now)
  touch(k)
end

-- A level of this key alone keeps a log of the takes of released
-- attempts (members "id:amount", scored by when they were logged) and
-- their sum ('ls'); its level has the window ('w') while it does.
local function log_entry(member)
  local id, amount = string.match(member, '^(%d+):(.+)$')
  return id, num(amount, 0)
end

-- log_sum drops the takes that left the window (ms) and sums the rest.
local function log_sum(name, window)
  local k, lk = p .. ':lv:' .. name, p .. ':log:' .. name
  local sum = num(redis.call('HGET', k, 'ls'), 0)
  local old = redis.call('ZRANGEBYSCORE', lk, '-inf', now - window)
  if #old > 0 then
    for _, e in ipairs(old) do
      local _, amount = log_entry(e)
      sum = sum - amount
    end
    redis.call('ZREMRANGEBYSCORE', lk, '-inf', now - window)
    if redis.call('ZCARD', lk) == 0 then sum = 0 end
    redis.call('HSET', k, 'ls', tostring(sum))
  end
  return math.max(sum, 0)
end

local function log_add(name, amount)
  if amount <= 1e-9 then return end
  local id = num(redis.call('GET', p .. ':seq'), 0) + 1
  if not (id >= 1 and id < 2^53) then id = 1 end
  redis.call('SET', p .. ':seq', string.format('%d', id))
  touch(p .. ':seq')
  local k, lk = p .. ':lv:' .. name, p .. ':log:' .. name
  redis.call('ZADD', lk, now, id .. ':' .. tostring(amount))
  add(k, 'ls', amount)
  touch(lk)
  touch(k)
end

-- log_refund takes amount off the newest takes.
local function log_refund(name, amount)
  local k, lk = p .. ':lv:' .. name, p .. ':log:' .. name
  local e = redis.call('ZREVRANGE', lk, 0, -1, 'WITHSCORES')
  for i = 1, #e, 2 do
    if amount <= 1e-9 then break end
    local id, a = log_entry(e[i])
    local d = math.min(amount, a)
    redis.call('ZREM', lk, e[i])
    if a - d > 1e-9 then redis.call('ZADD', lk, e[i + 1], id .. ':' .. tostring(a - d)) end
    add(k, 'ls', -d)
    amount = amount - d
  end
end

-- log_frees is how long (ms) until the oldest takes that add up to
-- missing have left the window; nil when the log holds less.
local function log_frees(name, window, missing)
  local e = redis.call('ZRANGE', p .. ':log:' .. name, 0, -1, 'WITHSCORES')
  for i = 1, #e, 2 do
    local _, amount = log_entry(e[i])
    missing = missing - amount
    if missing <= 1e-9 then return num(e[i + 1], now) + window - now end
  end
  return nil
end

-- paced_of is what the pace of a level lets go now ('pt' at 'pa'), at
-- its rate, up to its burst.
local function paced_of(name, pace, burst)
  local h = redis.call('HMGET', p .. ':lv:' .. name, 'pt', 'pa')
  local tokens = num(h[1], burst)
  local at = math.min(num(h[2], now), now)
  return math.min(burst, tokens + pace * (now - at) / 1000)
end

local level_args = 13

local function levels_from(first, n)
  local out = {}
  for i = 0, n - 1 do
    local b = first + i * level_args
    out[#out + 1] = {name = ARGV[b], amount = tonumber(ARGV[b + 1]), rate = tonumber(ARGV[b + 2]), size = tonumber(ARGV[b + 3]),
      pace = tonumber(ARGV[b + 4]), burst = tonumber(ARGV[b + 5]), quota = tonumber(ARGV[b + 6]), window = tonumber(ARGV[b + 7]),
      reset = tonumber(ARGV[b + 8]), hold = tonumber(ARGV[b + 9]), taken = tonumber(ARGV[b + 10]), ago = tonumber(ARGV[b + 11]),
      steps = tonumber(ARGV[b + 12])}
  end
  return out
end

-- members counts the processes heard from within ttl ms, me among them
-- (me may be empty), and says me's place among them by name.
local function members(me, ttl)
  local k = p .. ':procs'
  if me ~= '' then redis.call('HSET', k, me, now) end
  local h = redis.call('HGETALL', k)
  local ids = {}
  for i = 1, #h, 2 do
    if now - num(h[i + 1], 0) > ttl then
      redis.call('HDEL', k, h[i])
    else
      ids[#ids + 1] = h[i]
    end
  end
  touch(k)
  table.sort(ids)
  local rank = 0
  for i, id in ipairs(ids) do
    if id == me then rank = i - 1 end
  end
  return #ids, rank
end

-- A reservation (budgetstore.Reservation) is kept in ':rsv' as
-- "slots:calls:seq:until" under its process's name.
local function reservation(v)
  local slots, calls, seq, until_ms = string.match(v or '', '^([^:]*):([^:]*):([^:]*):([^:]*)$')
  return math.max(num(slots, 0), 0), math.max(num(calls, 0), 0), num(seq, 0), num(until_ms, 0)
end

-- reserve keeps what process me holds in flight outside leases: slots,
-- of them calls its calls in flight, until ttl ms from now; unless a
-- reservation of me with a seq as high that has not run out came first.
local function reserve(me, slots, calls, seq, ttl)
  if me == '' or not (seq > 0) then return end
  local k = p .. ':rsv'
  local _, _, oseq, ountil = reservation(redis.call('HGET', k, me))
  if oseq >= seq and ountil > now then return end
  slots = math.max(0, math.floor(num(slots, 0)))
  calls = math.min(slots, math.max(0, math.floor(num(calls, 0))))
  redis.call('HSET', k, me, slots .. ':' .. calls .. ':' .. seq .. ':' .. (now + ttl))
  touch(k)
end

-- reserved is what the processes hold in flight outside leases for one of
-- process me: the slots of the others, and me's own calls. A reservation
-- that ran out is dropped.
local function reserved(me)
  local k = p .. ':rsv'
  local h = redis.call('HGETALL', k)
  local sum = 0
  for i = 1, #h, 2 do
    local slots, calls, _, until_ms = reservation(h[i + 1])
    if until_ms <= now then
      redis.call('HDEL', k, h[i])
    elseif h[i] ~= me then
      sum = sum + slots
    else
      sum = sum + calls
    end
  end
  return sum
end

-- gone holds the leases released in the last two minutes: a release sent
-- again, or an Acquire that arrives after the release of its lease, does
-- nothing more.
local function gone(id)
  redis.call('ZREMRANGEBYSCORE', p .. ':gone', '-inf', now)
  return redis.call('ZSCORE', p .. ':gone', id)
end

-- drop_lease ends a lease: what it took is no longer in flight, and what
-- the server charged of it (less back, per level, when given) is counted
-- as charged ('ld' sums what ended leases charged a level) and is logged
-- on a level that keeps a log. It returns, per level, what was charged
-- and what the level had been charged when the lease was admitted.
local function drop_lease(id, back)
  local d = redis.call('HGETALL', p .. ':lease:' .. id)
  local marks = redis.call('HGETALL', p .. ':leaseld:' .. id)
  local charged, charged_before = {}, {}
  for i = 1, #marks, 2 do charged_before[marks[i]] = num(marks[i + 1], 0) end
  for i = 1, #d, 2 do
    local name, amount = d[i], num(d[i + 1], 0)
    if add(p .. ':inflight', name, -amount) <= 1e-9 then
      redis.call('HDEL', p .. ':inflight', name) -- nothing in flight: a level's name no longer used leaves no field
    end
    local c = amount - ((back and back[name]) or 0)
    if c > 1e-9 then
      local k = p .. ':lv:' .. name
      add(k, 'ld', c)
      if num(redis.call('HGET', k, 'w'), 0) > 0 then log_add(name, c) end
      charged[name] = c
    end
  end
  redis.call('DEL', p .. ':lease:' .. id, p .. ':leaseld:' .. id)
  redis.call('ZREM', p .. ':leases', id)
  return charged, charged_before
end

-- the AIMD state, raised by one step per quiet interval since its last change;
-- the steps mirror bodo's quietInterval (2 s), paceStep (0.1), minPace (0.05)
-- and cutSpacing (1 s)
local function aimd(maxinflight)
  local s = redis.call('HMGET', p .. ':state', 'cap', 'pace', 'lc')
  local cap = num(s[1], maxinflight)
  local pace = num(s[2], 1)
  local lc = math.min(num(s[3], now), now)
  local steps = math.floor((now - lc) / 2000)
  if steps > 0 then
    cap = cap + steps
    pace = pace + 0.1 * steps
    lc = lc + steps * 2000
  end
  return math.max(1, math.min(cap, maxinflight)), math.min(1, pace), lc
end

local function save_aimd(cap, pace, lc)
  redis.call('HSET', p .. ':state', 'cap', tostring(cap), 'pace', tostring(pace), 'lc', lc)
  touch(p .. ':state')
end
`

// acquireScript admits one attempt or says why not.
// ARGV: lease, ttl ms, cost, key rate, max in flight, refusal limit,
// refusal window ms, unbudgeted (0/1), process, process ttl ms, the
// process's reservation (slots, calls, seq, ttl ms), number of levels, then
// per level name, amount, rate, size, pace, burst, quota, window ms, reset
// ms, hold ms. It answers {admitted (0/1), wait ms,
// reason, policy, ms until reset, ttl ms, processes, rank, refusal
// (0/1), held}: a reason when not admitted (a level's name also when its
// pace holds the call), a policy for an exhausted quota, refusal when a
// refusal's wait holds the level (its 'ru', set by an owe), and held,
// when admitted, the name of each level taken from and what it holds
// after the take (budgetstore.Grant.Levels). A
// lease already admitted is admitted again without taking anything; a
// lease already released is not.
var acquireScript = redis.NewScript(luaPrelude + `
local lease = ARGV[1]
local ttl = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local keyrate = tonumber(ARGV[4])
local maxinflight = tonumber(ARGV[5])
local rlimit = tonumber(ARGV[6])
local rwindow = tonumber(ARGV[7])
local unbudgeted = ARGV[8] == '1'
local n, rank = members(ARGV[9], tonumber(ARGV[10]))
reserve(ARGV[9], ARGV[11], ARGV[12], num(ARGV[13], 0), num(ARGV[14], 0))
local levels = levels_from(16, tonumber(ARGV[15]))
local function no(wait, reason, policy, untilms, refusal)
  return {0, wait, reason, policy or '', untilms or 0, ttl, n, rank, refusal and 1 or 0, {}}
end

for _, id in ipairs(redis.call('ZRANGEBYSCORE', p .. ':leases', '-inf', now)) do
  drop_lease(id, nil)
end
redis.call('ZREMRANGEBYSCORE', p .. ':refusals', '-inf', now - rwindow)
if gone(lease) then
  return no(0, 'released')
end
if redis.call('ZSCORE', p .. ':leases', lease) then
  redis.call('ZADD', p .. ':leases', now + ttl, lease)
  return {1, 0, '', '', 0, ttl, n, rank, 0, {}}
end

local blocks = {'*'}
for _, l in ipairs(levels) do blocks[#blocks + 1] = l.name end
for _, name in ipairs(blocks) do
  local untilms = num(redis.call('HGET', p .. ':blocks', name))
  if untilms and untilms > now then
    return no(0, 'quota', name, untilms - now)
  elseif untilms then
    redis.call('HDEL', p .. ':blocks', name)
  end
end

local paused = num(redis.call('HGET', p .. ':state', 'paused'), 0)
if paused > now then
  return no(paused - now, 'lockout')
end

local leases = redis.call('ZCARD', p .. ':leases')
local refusals = redis.call('ZCARD', p .. ':refusals')
if refusals + leases >= rlimit then
  local wait = 0
  if refusals > 0 then
    local oldest = redis.call('ZRANGE', p .. ':refusals', 0, 0, 'WITHSCORES')
    wait = num(oldest[2], now) + rwindow - now
  end
  return no(math.max(wait, 0), 'refusal-guard')
end

local held = {}
if not unbudgeted then
  local cap, pace, lc = aimd(maxinflight)
  if leases + reserved(ARGV[9]) >= math.floor(cap) then
    save_aimd(cap, pace, lc)
    return no(0, 'in-flight')
  end
  local wait, reason, refusal = 0, '', false
  for _, l in ipairs(levels) do
    local k = p .. ':lv:' .. l.name
    local m
    local asked = l.rate
    l.tokens, l.rate, m = tokens_of(l)
    local h = redis.call('HMGET', k, 'ru', 'w', 'nb')
    local ru, logw, nb = num(h[1], 0), num(h[2], 0), num(h[3], 0)
    local logged = l.quota > 0 and l.window > 0
    if logged and logw ~= l.window then
      redis.call('HSET', k, 'w', l.window)
    elseif not logged and logw > 0 then
      redis.call('HDEL', k, 'w')
    end
    -- What is left is the larger of the server's word (tokens) and,
    -- unless a refusal holds the level, the bound of its log.
    local have, bound = l.tokens, nil
    if logged and ru <= now and nb <= now then
      bound = l.quota - log_sum(l.name, l.window) - num(redis.call('HGET', p .. ':inflight', l.name), 0)
      have = math.max(have, bound)
    end
    l.have = have
    -- A call bigger than the level goes when it is full, into debt.
    local need = math.min(l.amount, l.size)
    if ru > now then
      if ru - now > wait then wait, reason, refusal = ru - now, l.name, true end
    elseif have < need - 1e-9 then
      local w
      if l.rate > 0 then w = math.ceil((need - l.tokens) / l.rate * 1000) end
      if m and m > now and l.tokens + 1 >= need - 1e-9 and (not w or m - now < w) then w = m - now end
      if bound then
        local f = log_frees(l.name, l.window, need - bound)
        if f and (not w or f < w) then w = f end
      end
      -- Else only an answer, or a call in flight that lands and leaves
      -- the window, frees it: look again in a second.
      w = math.min(w or 1000, 3600000)
      if w > wait then wait, reason, refusal = w, l.name, false end
    end
    -- A level that frees in steps spreads what is left of it over the
    -- time until its oldest take leaves the log, as one process does
    -- with its own log: a burst never leaves it freeing nothing for the
    -- rest of a window. At once go two seconds of that pace or a tenth
    -- of a window's worth at the rate what is left allows (bodo's
    -- paceBurst and spreadBurst), at least one.
    if bound and l.rate == 0 and l.pace == 0 and asked > 0 then
      -- Another process showed that the level frees in steps; this one,
      -- which has not seen it yet, is spread with the rest, at the
      -- level's quota and a tenth of it at once.
      l.pace = l.quota * 1000 / l.window
      l.burst = math.max(2 * l.pace, 0.1 * l.size, 1)
    end
    if l.pace > 0 and bound and l.rate == 0 then
      local oldest = redis.call('ZRANGE', p .. ':log:' .. l.name, 0, 0, 'WITHSCORES')
      if #oldest > 0 then
        local secs = (num(oldest[2], now) + l.window - now) / 1000
        if secs > 0 then
          local left = math.max(have, 0) / secs
          l.pace = math.min(l.pace, left)
          l.burst = math.min(l.burst, math.max(2 * l.pace, 0.1 * math.min(l.size, left * l.window / 1000), 1))
        end
      end
    end
    -- A paced level holds a call until its pace has the call's amount
    -- (at most its burst).
    if l.pace > 0 and l.burst > 0 then
      l.paced = paced_of(l.name, l.pace, l.burst)
      local need = math.min(l.amount, l.burst)
      if l.paced < need - 1e-9 then
        local w = math.min(3600000, math.ceil((need - l.paced) / l.pace * 1000))
        if w > wait then wait, reason, refusal = w, l.name, false end
      end
    end
  end
  local pt, pa
  if pace < 1 then
    local pr = pace * keyrate
    local burst = math.max(pr * 2, 1)
    local s = redis.call('HMGET', p .. ':state', 'pt', 'pa')
    pt = num(s[1], burst)
    pa = num(s[2], now)
    if pa > now then
      pa = now
      redis.call('HSET', p .. ':state', 'pa', now)
    end
    if now > pa then pt = math.min(burst, pt + pr * (now - pa) / 1000) end
    local need = math.min(cost, burst)
    if pt < need - 1e-9 and pr > 0 then
      local w = math.min(3600000, math.ceil((need - pt) / pr * 1000))
      if w > wait then wait, reason, refusal = w, 'pace', false end
    end
  end
  save_aimd(cap, pace, lc)
  if wait > 0 then
    return no(wait, reason, nil, nil, refusal)
  end
  for _, l in ipairs(levels) do
    held[#held + 1] = l.name
    held[#held + 1] = tostring(l.have - l.amount)
    save(l.name, l.tokens - l.amount)
    if l.paced then
      redis.call('HSET', p .. ':lv:' .. l.name, 'pt', tostring(l.paced - l.amount), 'pa', now)
    end
    add(p .. ':inflight', l.name, l.amount)
    redis.call('HSET', p .. ':lease:' .. lease, l.name, tostring(l.amount))
    redis.call('HSET', p .. ':leaseld:' .. lease, l.name, redis.call('HGET', p .. ':lv:' .. l.name, 'ld') or '0')
  end
  touch(p .. ':leaseld:' .. lease)
  touch(p .. ':inflight')
  if pace < 1 then
    redis.call('HSET', p .. ':state', 'pt', tostring(pt - cost), 'pa', now)
  end
end
redis.call('ZADD', p .. ':leases', now + ttl, lease)
-- the lease's amounts live as long as the other keys: only the ZSET
-- entry expires the lease, and drop_lease still finds what to take back
touch(p .. ':lease:' .. lease)
touch(p .. ':leases')
return {1, 0, '', '', 0, ttl, n, rank, 0, held}
`)

// releaseScript ends an attempt; a release of a lease released already
// does nothing. ARGV: lease, refused (0/1), cut (0/1), refusal window ms,
// max in flight, pause ms, block policy, block ms, cut factor, ms since
// the refusal, linger ms (the lease holds its slot that long after), the
// process, its reservation (slots, calls, seq, ttl ms), then three lists, each a count followed by name, amount,
// rate, size, pace, burst, quota, window ms, reset ms, hold ms per level:
// refund, left, owe.
var releaseScript = redis.NewScript(luaPrelude + `
local lease = ARGV[1]
local refused = ARGV[2] == '1'
local cut = ARGV[3] == '1'
local rwindow = tonumber(ARGV[4])
local maxinflight = tonumber(ARGV[5])
local pausems = tonumber(ARGV[6])
local block = ARGV[7]
local blockms = tonumber(ARGV[8])
local factor = tonumber(ARGV[9])
local ago = tonumber(ARGV[10])
local linger = tonumber(ARGV[11])
local i = 17
local nref = tonumber(ARGV[i]); local refund = levels_from(i + 1, nref); i = i + 1 + nref * level_args
local nleft = tonumber(ARGV[i]); local left = levels_from(i + 1, nleft); i = i + 1 + nleft * level_args
local nowe = tonumber(ARGV[i]); local owe = levels_from(i + 1, nowe)

reserve(ARGV[12], ARGV[13], ARGV[14], num(ARGV[15], 0), num(ARGV[16], 0))
if gone(lease) then
  return 0
end
local back = {}
for _, l in ipairs(refund) do back[l.name] = (back[l.name] or 0) + l.amount end
local charged, charged_before = drop_lease(lease, back)
if linger > 0 then
  redis.call('ZADD', p .. ':leases', now + linger, lease)
end
redis.call('ZADD', p .. ':gone', now + 120000, lease)
touch(p .. ':gone')
if refused and ago < rwindow then
  redis.call('ZADD', p .. ':refusals', now - ago, now .. ':' .. lease)
  redis.call('ZREMRANGEBYSCORE', p .. ':refusals', '-inf', now - rwindow)
  touch(p .. ':refusals')
end
for _, l in ipairs(refund) do
  local tokens, _, _, fresh = tokens_of(l)
  if not begun_since(l, fresh) then save(l.name, math.min(l.size, tokens + l.amount)) end
  if l.pace > 0 and l.burst > 0 then
    -- a replay: the turn of the level's pace it took goes back too
    redis.call('HSET', p .. ':lv:' .. l.name, 'pt', tostring(math.min(l.burst, paced_of(l.name, l.pace, l.burst) + l.amount)), 'pa', now)
  end
end
-- The server's word, less what is in flight, caps what is left; and
-- what is left is at least that less what other leases charged after
-- the attempt was admitted (the server may have counted it or not). A log that says more
-- than the server did holds the rest as taken now: others took it.
for _, l in ipairs(left) do
  local k = p .. ':lv:' .. l.name
  local inflight = num(redis.call('HGET', p .. ':inflight', l.name), 0)
  local upper = l.amount - inflight
  local lower = upper
  if charged_before[l.name] then
    local ld = num(redis.call('HGET', k, 'ld'), 0)
    lower = upper - math.max(0, ld - charged_before[l.name] - (charged[l.name] or 0))
  end
  local tokens, rate = tokens_of(l)
  tokens = math.max(math.min(tokens, upper), lower)
  save(l.name, tokens)
  local mu = math.max(0, 1 - rate * l.reset / 1000)
  if l.steps == 1 and l.reset > 0 then
    mu = 1
    redis.call('HSET', k, 'sw', now + l.reset)
  end
  redis.call('HSET', k, 'm', now + l.reset, 'mu', tostring(mu))
  if l.quota > 0 and l.window > 0 then
    log_add(l.name, l.quota - log_sum(l.name, l.window) - inflight - l.amount)
  end
  redis.call('HDEL', k, 'nb')
end
-- a level owing what a refused call lacked holds every call for the
-- refusal's wait ('ru'); one that frees in steps is refilled for no one
-- until its moment ('sw')
for _, l in ipairs(owe) do
  save(l.name, math.min(tokens_of(l), l.amount))
  local k = p .. ':lv:' .. l.name
  if l.hold > 0 then
    redis.call('HSET', k, 'ru', math.max(num(redis.call('HGET', k, 'ru'), 0), now + l.hold))
  end
  if l.steps == 1 and l.reset > 0 then
    redis.call('HSET', k, 'sw', now + l.reset)
  end
end
if cut then
  local lastcut = num(redis.call('HGET', p .. ':state', 'lcut'))
  if not lastcut or now - lastcut >= 1000 then
    local cap, pace, lc = aimd(maxinflight)
    if pace >= 1 then redis.call('HDEL', p .. ':state', 'pt', 'pa') end
    save_aimd(math.max(1, math.floor(cap * factor)), math.max(0.05, pace * factor), now)
    redis.call('HSET', p .. ':state', 'lcut', now)
  end
end
if pausems > 0 then
  local paused = num(redis.call('HGET', p .. ':state', 'paused'), 0)
  redis.call('HSET', p .. ':state', 'paused', math.max(paused, now + pausems))
  touch(p .. ':state')
end
if block ~= '' and blockms > 0 then
  local untilms = num(redis.call('HGET', p .. ':blocks', block), 0)
  -- the quotas exhausted before that have reset since leave no field
  local all = redis.call('HGETALL', p .. ':blocks')
  for i = 1, #all, 2 do
    if num(all[i + 1], 0) <= now then redis.call('HDEL', p .. ':blocks', all[i]) end
  end
  redis.call('HSET', p .. ':blocks', block, math.max(untilms, now + blockms))
  touch(p .. ':blocks')
end
return 1
`)

// refundScript gives amounts back, and takes a negative amount (a call
// admitted while Redis was unreachable) as a charged take, unless the
// count of the level began since (begun_since) or a refund of the same id
// came in the last ten minutes (':refunds', by when each id is
// forgotten). ARGV: count, then the levels as in releaseScript, then an
// id for each (empty for none).
var refundScript = redis.NewScript(luaPrelude + `
local n = tonumber(ARGV[1])
local ids = 2 + n * level_args
redis.call('ZREMRANGEBYSCORE', p .. ':refunds', '-inf', now)
for i, l in ipairs(levels_from(2, n)) do
  local tokens, _, _, fresh = tokens_of(l)
  local id = ARGV[ids + i - 1]
  local first = id == '' or redis.call('ZADD', p .. ':refunds', 'NX', now + 600000, id) == 1
  if first and not begun_since(l, fresh) then
    save(l.name, math.min(l.size, tokens + l.amount))
    if l.amount >= 0 then
      log_refund(l.name, l.amount)
    else
      local k = p .. ':lv:' .. l.name
      add(k, 'ld', -l.amount)
      if num(redis.call('HGET', k, 'w'), 0) > 0 then log_add(l.name, -l.amount) end
    end
  end
end
touch(p .. ':refunds')
return 1
`)

// renewScript keeps leases in flight, counts the process and keeps its
// reservation. ARGV: process, process ttl ms, lease ttl ms, the
// reservation (slots, calls, seq, ttl ms), then the leases. A lease it
// had no release of holds its slot for the lease time from now, and keeps
// what it took (':lease:', ':leaseld:') for another day, however long its
// call runs; also one it no longer holds (Redis came back empty, or the
// lease ran out while its process could not reach Redis), since its call
// is still in flight, without taking again what it took. A released one,
// lingering or not, is left as its release left it. It answers
// {processes, rank}.
var renewScript = redis.NewScript(luaPrelude + `
local n, rank = members(ARGV[1], tonumber(ARGV[2]))
local ttl = tonumber(ARGV[3])
reserve(ARGV[1], ARGV[4], ARGV[5], num(ARGV[6], 0), num(ARGV[7], 0))
for i = 8, #ARGV do
  if not gone(ARGV[i]) then
    redis.call('ZADD', p .. ':leases', now + ttl, ARGV[i])
    touch(p .. ':lease:' .. ARGV[i])
    touch(p .. ':leaseld:' .. ARGV[i])
  end
end
touch(p .. ':leases')
return {n, rank}
`)
