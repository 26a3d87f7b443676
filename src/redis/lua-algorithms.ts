/**
 * The window and log algorithms of the Redis script, in Lua, as fragments: a script holds only
 * those its limits use (each function defined costs Redis time on every call). GCRA has a script
 * of its own (lua-gcra.ts), and so do a fixed-window plan's decisions (lua-fixed-window.ts: its
 * refunds and controls still run these). Each is the same decision as its shared-memory twin in
 * src/algorithms/ (the decision vectors are compared in test/redis/redis-vectors.test.ts). Every
 * algorithm is a table of functions over a limit `L` (its kind and parameters, constants in the script)
 * and a state `s` read once per decision by `load`:
 *
 * - `load(key, L)`: the key's state at `now` (a missing key is a fresh one).
 * - `check(L, s, c, spent)`: whether `c` more would pass once `spent` is counted, and the wait
 *   in µs before it would (-1: never, the cost exceeds what the limit can hold).
 * - `remaining(L, s, spent)`, `reset(L, s, spent)`: what the decision reports.
 * - `write(key, L, s, cost)`: counts an admission, with an expiry at the moment the state equals
 *   a fresh key's (no sweeper).
 * - `refund(key, L, s, cost, at)`: takes back `cost` spent at `at` (µs on this server's clock)
 *   while the state still holds it.
 * - `force(key, L, s, cost)`: the per-key controls' penalty (`cost` > 0: counted now, past what
 *   the limit admits) and reward (`cost` < 0: given back now, never below a fresh key's state),
 *   as the shared-memory twins' `force` does them.
 * - `block(key, L, s, us)` (windows only): every request refused for `us` from now, a longer
 *   block kept.
 *
 * Every number is an integer below 2^53 except the sliding window's weighted estimate; stored
 * integers are written with %.0f (Lua would print 1.7e+15).
 *
 * States:
 * - fixed window: "window:count[:until:born]"; L = kind, period (µs), permits.
 * - sliding window: "window:current:previous[:until:born]"; L = kind, period (µs), permits.
 * - A window's `until` is the end of a block (µs; 0: none), written by `block` and kept by every
 *   later write while it is ahead; the key's expiry is then no earlier. `born` is when the key's
 *   state was made (µs), kept by every later write: a refund of a spend made before it (a reset
 *   deleted the state that counted the spend, and a later admission made this one) gives
 *   nothing back. A state without them (written before they existed) is not blocked, and takes
 *   refunds as before.
 * - sliding log: a list of admission stamps (µs), oldest first; L = kind, period, permits.
 */

/** What every fragment uses. */
const COMMON = `
local function int(x) return string.format('%.0f', x) end
local function ms(us) return math.max(1, math.ceil(us / 1000)) + pad end
`;

/**
 * A window state's parts. `fields`: every field as a number (the refunds). A decision reads the
 * counts alone and keeps the tail after them (':until:born', or '' in a state written before
 * those fields) as a string: `ahead` is a block end when ahead of now (else 0), `tailBlock` the tail's, `tailOf`
 * the tail a write stores (the loaded one unchanged, so that a decision formats no more numbers
 * than its counts; a new one for a state made now, born now, or blocked by this call). `blocked`
 * lengthens a check's wait `w` to the block's end.
 */
const FIELDS = `
local function fields(v)
  local out = {}
  for x in string.gmatch(v, '[^:]+') do out[#out + 1] = tonumber(x) end
  return out
end
local function ahead(u)
  if u and u > now then return u end
  return 0
end
local function blockEnd(f, at)
  return ahead(f[at])
end
local function tailPart(u, b)
  return ':' .. int(ahead(u)) .. ':' .. int(b)
end
local function tailBlock(tail)
  if tail == '' then return 0 end
  return ahead(tonumber(string.match(tail, '^:([^:]+)')))
end
local function tailOf(s)
  if s.tail ~= nil and not s.reblock then return s.tail end
  local b = now
  if s.tail ~= nil then b = tonumber(string.match(s.tail, '^:[^:]*:([^:]+)')) or 0 end
  return tailPart(s.u, b)
end
local function blocked(s, ok, w)
  if s.u > now then return false, math.max(w, s.u - now) end
  return ok, w
end
`;

/** Each window algorithm's Lua, by its id (redis-limits.ts): fixed window, sliding window, sliding log. */
const FRAGMENTS: Readonly<Record<number, string>> = {
  1: `local FIXED = {}
function FIXED.load(key, L)
  local w = math.floor(now / L[2])
  local s = { w = w, n = 0, ahead = false, u = 0 }
  local v = redis.call('GET', key)
  if v then
    local fw, fn, tail = string.match(v, '^([^:]+):([^:]+)(.*)$')
    fw = tonumber(fw)
    fn = tonumber(fn)
    -- A later stored window (this server's clock went back): counted there, never moved back.
    if fw == w then s.n = fn elseif fw > w then s.w = fw; s.n = fn; s.ahead = true end
    s.tail = tail
    s.u = tailBlock(tail)
  end
  return s
end
local function fixedCheck(L, s, c, spent)
  local p, P = L[2], L[3]
  local n = s.n + spent
  if n + c <= P then
    if s.ahead then return false, s.w * p - now end
    return true, 0
  end
  return false, (s.w + 1) * p - now
end
function FIXED.check(L, s, c, spent)
  if c > L[3] then return false, -1 end
  return blocked(s, fixedCheck(L, s, c, spent))
end
function FIXED.remaining(L, s, spent)
  if s.ahead or s.u > 0 then return 0 end
  -- Below 0 only after a rule lowered the permits under this window's count.
  return math.max(0, L[3] - s.n - spent)
end
function FIXED.reset(L, s, spent)
  local r = 0
  if s.n + spent > 0 then r = (s.w + 1) * L[2] - now end
  return math.max(r, s.u - now)
end
local function fixedSet(key, L, s, n)
  redis.call('SET', key, int(s.w) .. ':' .. int(n) .. tailOf(s), 'PX', ms(math.max((s.w + 1) * L[2], s.u) - now))
end
function FIXED.write(key, L, s, cost)
  fixedSet(key, L, s, s.n + cost)
end
function FIXED.refund(key, L, s, cost, at)
  local v = redis.call('GET', key)
  if not v then return end
  local f = fields(v)
  local b = f[4] or 0
  if f[1] == math.floor(at / L[2]) and f[2] >= cost and b <= at then
    redis.call('SET', key, int(f[1]) .. ':' .. int(f[2] - cost) .. tailPart(blockEnd(f, 3), b), 'KEEPTTL')
  end
end
function FIXED.force(key, L, s, cost)
  -- As FixedWindow32.force: a penalty fills the window at most (its count ends with it), a
  -- reward never goes below 0; a count a lowered rule left above the permits is not raised.
  local n
  if cost > 0 then n = math.max(s.n, math.min(L[3], s.n + cost)) else n = math.max(0, s.n + cost) end
  if n ~= s.n then fixedSet(key, L, s, n) end
end
function FIXED.block(key, L, s, us)
  s.u = math.max(s.u, now + us)
  s.reblock = true
  fixedSet(key, L, s, s.n)
end
ALGORITHMS[1] = FIXED
`,
  2: `local SLIDING = {}
function SLIDING.load(key, L)
  local p = L[2]
  local w = math.floor(now / p)
  local s = { w = w, curr = 0, prev = 0, later = false, u = 0 }
  local v = redis.call('GET', key)
  if v then
    local fw, fc, fp, tail = string.match(v, '^([^:]+):([^:]+):([^:]+)(.*)$')
    fw = tonumber(fw)
    local diff = fw - w
    if diff > 0 then s.w = fw; s.later = true end
    if diff >= 0 then s.curr = tonumber(fc); s.prev = tonumber(fp) elseif diff == -1 then s.prev = tonumber(fc) end
    s.tail = tail
    s.u = tailBlock(tail)
  end
  s.into = math.max(0, now - s.w * p)
  s.estimate = s.prev * (1 - s.into / p) + s.curr
  return s
end
-- The least wait after which prev * weight + curr + c <= permits.
local function slidingWait(p, P, curr, prev, into, c)
  local room = P - curr - c
  if room >= 0 and prev > 0 then
    local t = p * (1 - room / prev) - into
    if t < p - into then return math.max(0, t) end
  end
  local s = 0
  if curr > 0 then s = p * (1 - (P - c) / curr) end
  return p - into + math.max(0, s)
end
local function slidingCheck(L, s, c, spent)
  local p, P = L[2], L[3]
  if s.estimate + spent + c <= P and not s.later then return true, 0 end
  local w = slidingWait(p, P, s.curr + spent, s.prev, s.into, c)
  if s.later then w = w + s.w * p - now end
  return false, math.ceil(w)
end
function SLIDING.check(L, s, c, spent)
  if c > L[3] then return false, -1 end
  -- The estimate only falls while nothing is written: what passes at the count's wait passes
  -- at any later moment, the block's end too.
  return blocked(s, slidingCheck(L, s, c, spent))
end
function SLIDING.remaining(L, s, spent)
  if s.later or s.u > 0 then return 0 end
  return math.max(0, math.floor(L[3] - s.estimate - spent))
end
function SLIDING.reset(L, s, spent)
  local r = 0
  if s.curr + spent > 0 then r = (s.w + 2) * L[2] - now elseif s.prev > 0 then r = (s.w + 1) * L[2] - now end
  return math.max(r, s.u - now)
end
local function slidingSet(key, L, s, curr, prev)
  local v = int(s.w) .. ':' .. int(curr) .. ':' .. int(prev) .. tailOf(s)
  redis.call('SET', key, v, 'PX', ms(math.max((s.w + 2) * L[2], s.u) - now))
end
function SLIDING.write(key, L, s, cost)
  slidingSet(key, L, s, s.curr + cost, s.prev)
end
function SLIDING.refund(key, L, s, cost, at)
  local v = redis.call('GET', key)
  if not v then return end
  local f = fields(v)
  local w = math.floor(at / L[2])
  local b = f[5] or 0
  if b > at then return end
  if f[1] == w and f[2] >= cost then f[2] = f[2] - cost
  elseif f[1] == w + 1 and f[3] >= cost then f[3] = f[3] - cost
  else return end
  redis.call('SET', key, int(f[1]) .. ':' .. int(f[2]) .. ':' .. int(f[3]) .. tailPart(blockEnd(f, 4), b), 'KEEPTTL')
end
function SLIDING.force(key, L, s, cost)
  -- As SlidingWindow.force: a penalty adds to this window's count, past the permits (it weighs
  -- on the next window as its previous count), up to what the shared-memory count holds
  -- (4,194,303: the same decisions after it); a reward takes from this window's count, then from
  -- the previous one's, never below 0.
  local curr, prev = s.curr, s.prev
  if cost > 0 then curr = math.max(curr, math.min(4194303, curr + cost))
  else
    local fromCurr = math.min(curr, -cost)
    curr = curr - fromCurr
    prev = math.max(0, prev - (-cost - fromCurr))
  end
  if curr ~= s.curr or prev ~= s.prev then slidingSet(key, L, s, curr, prev) end
end
function SLIDING.block(key, L, s, us)
  s.u = math.max(s.u, now + us)
  s.reblock = true
  slidingSet(key, L, s, s.curr, s.prev)
end
ALGORITHMS[2] = SLIDING
`,
  3: `local LOG = {}
local function stampAt(key, i) return tonumber(redis.call('LINDEX', key, i)) end
local function age(ts)
  local a = now - ts
  if a < 0 then return 0 end
  return a
end
function LOG.load(key, L)
  local p = L[2]
  local len = redis.call('LLEN', key)
  -- The leading stamps that no longer count (the list is in time order): binary search.
  local lo, hi = 0, len
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if now - stampAt(key, mid) >= p then lo = mid + 1 else hi = mid end
  end
  return { key = key, len = len, expired = lo }
end
function LOG.check(L, s, c, spent)
  local p, P = L[2], L[3]
  if c > P then return false, -1 end
  local live = s.len - s.expired + spent
  if live + c <= P then return true, 0 end
  -- The oldest stamp that must expire first; one of this decision's own counts as now.
  local i = s.expired + live + c - P - 1
  if i >= s.len then return false, p end
  return false, p - age(stampAt(s.key, i))
end
function LOG.remaining(L, s, spent)
  -- Below 0 only after a rule lowered the permits: the log then holds more than they allow.
  return math.max(0, L[3] - (s.len - s.expired) - spent)
end
function LOG.reset(L, s, spent)
  if spent > 0 then return L[2] end
  if s.len > s.expired then return L[2] - age(stampAt(s.key, s.len - 1)) end
  return 0
end
function LOG.write(key, L, s, cost)
  local stamp = now
  if s.len > s.expired then stamp = math.max(now, stampAt(key, s.len - 1)) end
  if s.expired > 0 then redis.call('LTRIM', key, s.expired, -1) end
  -- In chunks: unpack has a limit on how many values it returns.
  local v = int(stamp)
  local left = cost
  while left > 0 do
    local args = {}
    for i = 1, math.min(left, 1000) do args[i] = v end
    redis.call('RPUSH', key, unpack(args))
    left = left - #args
  end
  redis.call('PEXPIRE', key, ms(stamp + L[2] - now))
end
function LOG.refund(key, L, s, cost, at)
  redis.call('LREM', key, cost, int(at))
end
function LOG.force(key, L, s, cost)
  local P = L[3]
  if cost > 0 then
    -- As SlidingLog.force: stamps at now, as an admission of that many, past the free places
    -- too: the log keeps its newest P stamps.
    LOG.write(key, L, s, math.min(cost, P))
    redis.call('LTRIM', key, -P, -1)
  else
    -- The newest stamps that still count, at most -cost of them, go (LTRIM drops an emptied list).
    local k = math.min(-cost, s.len - s.expired)
    if k > 0 then redis.call('LTRIM', key, 0, -k - 1) end
  end
end
ALGORITHMS[3] = LOG
`,
};

/** The Lua of the window algorithms `kinds` (ids 1 to 3), defining `ALGORITHMS[id]` for each. */
export function luaAlgorithms(kinds: readonly number[]): string {
  const parts = [COMMON, 'local ALGORITHMS = {}'];
  if (kinds.includes(1) || kinds.includes(2)) parts.push(FIELDS);
  for (const k of [...new Set(kinds)].sort()) parts.push(FRAGMENTS[k] as string);
  return parts.join('\n');
}
