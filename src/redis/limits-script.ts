import { createHash } from 'node:crypto';
import { luaAlgorithms } from './lua-algorithms.js';
import { fixedWindowScript } from './lua-fixed-window.js';
import { gcraScript } from './lua-gcra.js';
import { LUA_DECISIONS_CLOSE, LUA_DECISIONS_OPEN, LUA_PUSH_LATE, LUA_RETURN_BATCH, luaPushDecision } from './script-reply.js';
import type { RedisLimit } from './redis-limits.js';

/**
 * Every decision on Redis, as one Lua script made for one set of limits: a batch of decisions,
 * each over every limit of one key (and the global cap's, when it lives on the same server), each
 * atomic (Redis runs a script alone). The algorithms are in lua-algorithms.ts; a script holds
 * only those its limits use, and the limits themselves as constants: each argument and each
 * function a script defines costs Redis time on every call (measured: 2 us of 9 per decision).
 *
 * Time is Redis's own (`TIME`, microseconds), so no client clock can mint quota. A GCRA limit's
 * state is its theoretical arrival time (TAT) in whole microseconds plus a fraction in units of
 * 1/k microsecond, where k is chosen per limit so that its emission interval T is a whole number
 * of units (redis-limits.ts): every sum is an exact integer below 2^53, so the script admits
 * exactly what the shared-memory GCRA admits. Windows count in whole microseconds.
 *
 * A refusal and a probe (cost 0) write nothing; an admission writes every limit with an expiry at
 * the moment its state equals a fresh key's. A decision that reaches Redis after its deadline (on
 * Redis's clock, see script-batcher.ts) writes nothing and answers LATE. A negative cost is a
 * refund of -cost (the global cap on Cluster): for a window or log, spent at the time its deadline
 * field holds; for GCRA, the last -cost of a spend whose slot ends at that time (lua-gcra.ts).
 * The per-key controls (redis-core.ts, `control`) touch the key limits only, never a cap: on
 * window and log plans, a reward is a negative cost with want 0, a penalty a cost with want -1,
 * a block of `cost` µs want -2 (GCRA plans' controls: lua-gcra.ts).
 *
 * ARGV[1]: one string holding, comma-separated, the number of decisions, then per decision
 * cost, deadline (µs on Redis's clock, 0: none) and want (>= cost: a lease asks for up to `want`
 * and is granted what every limit still holds, if that is at least `cost`; a plain decision
 * wants its cost). ARGV[2], tests only: the time to decide at, in µs, instead of Redis's TIME;
 * ARGV[3], tests only with ARGV[2]: ms added to every expiry written.
 * KEYS: per decision its key limits' keys, then the global limits' keys.
 *
 * A GCRA plan's script and a fixed-window plan's are written out for their limits (lua-gcra.ts,
 * lua-fixed-window.ts); sliding windows and logs use the generic algorithms. Those two kinds of
 * plan have a second script for one decision alone (`single`): ARGV[1..3]
 * its cost, deadline and want, ARGV[4] and ARGV[5] the tests' time and pad; KEYS as for a batch
 * of one. Its reply holds the decision's part told apart by its length (script-reply.ts,
 * luaReturnDecision): none when late; [debt] (a plan of one key limit: its debt after, in units) or [remaining,
 * resetAfterUs] for an admission of exactly its cost that leaves the key open; else the six
 * fields. The same tail follows.
 *
 * Reply: an array of integers. Per decision, most often [ALLOWED_PLAIN, remaining,
 * resetAfterUs]: admitted, granted its cost, and the key still open (blockedUs 0); [LATE] for a
 * decision that arrived late; otherwise [status, remaining, retryAfterUs (-1: never),
 * resetAfterUs, blockedUs, granted]. Then, when the script holds a global cap, capBlockedUs;
 * last, Redis's time in µs. `blockedUs` is how long no request of cost >= 1 on the key can pass
 * after this decision (0: one could now), `capBlockedUs` the same for the global cap after the
 * whole batch: the refusal cache holds them.
 * The numbers each way are as few as that allows: a client spends a few tenths of a µs on each
 * argument and each integer of a reply (ioredis, 16 decisions a call: 98 integers cost 23 µs of
 * the client's CPU a call more than one string; a string costs Redis more to format).
 */
/**
 * The batch script's last lines: `out`, the cap's `capBlocked` (when it has one) and Redis's time,
 * led by the messages of decisions that failed (LUA_RETURN_BATCH).
 */
function reply(capped: boolean): string {
  return `
${capped ? 'out[#out + 1] = capBlocked\n' : ''}out[#out + 1] = now
${LUA_RETURN_BATCH}
`;
}

/**
 * The script's first lines: `now`, Redis's time in µs, or the tests' time from ARGV[`at`]. TIME's
 * two strings are numbers to Lua's arithmetic, exactly (no tonumber to call). `pad`, 0 but in
 * tests (ARGV[`at` + 1], ms), lengthens every expiry written: a test's clock stands still while
 * Redis's runs on, and a key must not expire on Redis's clock before the test's reaches its end.
 */
function clock(at: number): string {
  return `local now = ARGV[${at}]
local pad = 0
if now then
  now = tonumber(now)
  pad = tonumber(ARGV[${at + 1}] or 0)
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
`;
}

/** The Lua table of the limits' kinds and numbers, for the generic algorithms (lua-algorithms.ts). */
function luaLimits(all: readonly RedisLimit[]): string {
  return `{ ${all.map((l) => `{ ${[l.kind, ...l.args].map(String).join(', ')} }`).join(', ')} }`;
}

/** Lua locals the generic algorithms' steps read: the limits, and keyOf(j, i) (limit i, from 1, of decision j). */
function luaGenericLocals(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[]): string {
  return `local nl = ${keyLimits.length}
local ng = ${global.length}
local lim = ${luaLimits([...keyLimits, ...global])}
local function keyOf(j, i)
  if i <= nl then return KEYS[j * nl + i] end
  return KEYS[nd * nl + i - nl]
end`;
}

/**
 * The generic algorithms' steps other than a decision, for decision j (its cost, deadline and
 * want read), each a Lua block that writes and answers nothing:
 * - reward: -cost given back now under each key limit, never below a fresh key's state;
 * - refund: -cost spent at `deadline` taken back under every limit, the cap's too;
 * - control: a penalty of cost (want -1), or a block of cost µs (want -2), under each key limit.
 */
const RARE_STEPS = {
  reward: `local loaded = {}
for i = 1, nl do loaded[i] = ALGORITHMS[lim[i][1]].load(keyOf(j, i), lim[i]) end
for i = 1, nl do
  local L = lim[i]
  ALGORITHMS[L[1]].force(keyOf(j, i), L, loaded[i], cost)
end`,
  refund: `for i = 1, nl + ng do
  local L = lim[i]
  local A = ALGORITHMS[L[1]]
  local key = keyOf(j, i)
  A.refund(key, L, A.load(key, L), -cost, deadline)
end`,
  control: `local loaded = {}
for i = 1, nl do loaded[i] = ALGORITHMS[lim[i][1]].load(keyOf(j, i), lim[i]) end
for i = 1, nl do
  local L = lim[i]
  local A = ALGORITHMS[L[1]]
  local key = keyOf(j, i)
  if want == -1 then A.force(key, L, loaded[i], cost) else A.block(key, L, loaded[i], cost) end
end`,
};

function indented(text: string, indent: string): string {
  return text.split('\n').map((line) => indent + line).join('\n');
}

/**
 * The Lua of an expression whose value is a function (j, cost, deadline, want) that applies a
 * refund, a reward or a control of decision j with the generic algorithms: a script written out
 * for decisions (lua-fixed-window.ts) evaluates it only when one of these comes, so that a call
 * of decisions alone defines none of the algorithms' functions.
 */
function rareHandler(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[]): string {
  return `(function()
${luaAlgorithms([...keyLimits, ...global].map((l) => l.kind))}
${luaGenericLocals(keyLimits, global)}
return function(j, cost, deadline, want)
  if cost < 0 and want == 0 then
${indented(RARE_STEPS.reward, '    ')}
  elseif cost < 0 then
${indented(RARE_STEPS.refund, '    ')}
  else
${indented(RARE_STEPS.control, '    ')}
  end
end
end)()`;
}

const head = `${clock(2)}local arg = string.gmatch(ARGV[1], '[^,]+')
local nd = tonumber(arg())
`;

/**
 * The body of a plan's script written out for its limits, after its first lines (the batch's
 * `head`, or a single decision's clock): GCRA's (lua-gcra.ts) or the fixed windows'
 * (lua-fixed-window.ts), in the batch form or the one for a decision alone; null for the other
 * plans, which run the generic algorithms. A plan has one algorithm.
 */
function writtenOut(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[], single: boolean): string | null {
  const all = [...keyLimits, ...global];
  if (all.every((l) => l.kind === 0)) return gcraScript(keyLimits, global, single) + (single ? '' : reply(global.length > 0));
  if (all.every((l) => l.kind === 1)) return fixedWindowScript(keyLimits, global, single, rareHandler(keyLimits, global));
  return null;
}

function scriptText(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[]): string {
  const body = writtenOut(keyLimits, global, false);
  if (body !== null) return head + body;
  return genericScriptText(keyLimits, global);
}

/**
 * The script of a plan with the generic algorithms (lua-algorithms.ts), each a table of
 * functions: sliding windows and logs, and (in tests, to compare) fixed windows.
 */
export function genericScriptText(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[]): string {
  const all = [...keyLimits, ...global];
  return `${head}${luaAlgorithms(all.map((l) => l.kind))}
${luaGenericLocals(keyLimits, global)}
local out = {}
local states = {}
local keys = {}
local function push(status, remaining, wait, reset, blocked, granted, cost)
  local n = #out
${luaPushDecision('granted', '  ')}
end
${LUA_DECISIONS_OPEN}
  local cost, deadline, want = tonumber(arg()), tonumber(arg()), tonumber(arg())
  if cost < 0 and want == 0 then
${indented(RARE_STEPS.reward, '    ')}
    push(0, 0, 0, 0, 0, 0, 1)
  elseif cost < 0 then
${indented(RARE_STEPS.refund, '    ')}
    push(0, 0, 0, 0, 0, 0, 1)
  elseif deadline > 0 and now > deadline then
    ${LUA_PUSH_LATE}
  elseif want < 0 then
${indented(RARE_STEPS.control, '    ')}
    push(0, 0, 0, 0, 0, 0, 1)
  else
    local keyRefused, keyNever, keyWait = false, false, 0
    local capRefused, capNever, capWait = false, false, 0
    for i = 1, nl + ng do
      local key = keyOf(j, i)
      keys[i] = key
      local L = lim[i]
      local s = ALGORITHMS[L[1]].load(key, L)
      states[i] = s
      local ok, w = ALGORITHMS[L[1]].check(L, s, cost, 0)
      if not ok then
        if i <= nl then
          keyRefused = true
          if w < 0 then keyNever = true else keyWait = math.max(keyWait, w) end
        else
          capRefused = true
          if w < 0 then capNever = true else capWait = math.max(capWait, w) end
        end
      end
    end
    -- As the shared-memory limiter answers: the key's limits first; the cap only when they allow.
    -- A probe (cost 0) passes: it asks what is left and counts nothing.
    local status, wait, upto = 0, 0, nl + ng
    if cost == 0 then
      status = 0
    elseif keyRefused then
      status = keyNever and 2 or 1
      wait = keyNever and -1 or keyWait
      upto = nl
    elseif capRefused then
      status = 3
      wait = capNever and -1 or capWait
    end
    local spent = 0
    if status == 0 then spent = cost end
    -- A lease: as much of want as every limit still holds (at least the cost, which passed).
    if status == 0 and want > cost then
      local room = want
      for i = 1, nl + ng do
        local L = lim[i]
        room = math.min(room, ALGORITHMS[L[1]].remaining(L, states[i], 0))
      end
      spent = math.max(cost, room)
    end
    -- Remaining from what each limit holds after this decision (unspent if refused); reset and
    -- the refusal cache's block from the key's limits.
    local remaining, reset, blocked = -1, 0, 0
    for i = 1, upto do
      local L = lim[i]
      local A = ALGORITHMS[L[1]]
      local s = states[i]
      local r = A.remaining(L, s, spent)
      if remaining < 0 or r < remaining then remaining = r end
      if i <= nl then
        reset = math.max(reset, A.reset(L, s, spent))
        local ok, w = A.check(L, s, 1, spent)
        if not ok and w > 0 then blocked = math.max(blocked, w) end
      end
    end
    if spent > 0 then
      for i = 1, nl + ng do ALGORITHMS[lim[i][1]].write(keys[i], lim[i], states[i], spent) end
    end
    push(status, remaining, wait, reset, blocked, spent, cost)
  end
${LUA_DECISIONS_CLOSE}
-- The cap after the whole batch: how long it refuses every request.
local capBlocked = 0
for i = nl + 1, nl + ng do
  local L = lim[i]
  local A = ALGORITHMS[L[1]]
  local key = keyOf(0, i)
  local ok, w = A.check(L, A.load(key, L), 1, 0)
  if not ok and w > 0 then capBlocked = math.max(capBlocked, w) end
end
${reply(global.length > 0)}`;
}

/** A script's text and its SHA1, for EVALSHA. */
export interface ScriptText {
  readonly text: string;
  readonly sha: string;
}

/** A plan's script, and its script for one decision alone (GCRA and fixed-window plans; null: the batch's serves). */
export interface LimitsScript extends ScriptText {
  readonly single: ScriptText | null;
}

const scripts = new Map<string, LimitsScript>();
const MAX_SCRIPTS = 512;

/**
 * The script for `keyLimits` and the cap's `global` limits, made once per distinct set (each is
 * one entry in Redis's script cache: a policy's rules make one per rule).
 */
export function limitsScript(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[]): LimitsScript {
  const text = scriptText(keyLimits, global);
  let s = scripts.get(text);
  if (s === undefined) {
    // Rules that keep changing would make new scripts for ever: keep the last few hundred.
    if (scripts.size >= MAX_SCRIPTS) scripts.clear();
    const single = writtenOut(keyLimits, global, true);
    s = { ...withSha(text), single: single === null ? null : withSha(clock(4) + single) };
    scripts.set(text, s);
  }
  return s;
}

function withSha(text: string): ScriptText {
  return { text, sha: createHash('sha1').update(text).digest('hex') };
}

export { ALLOWED, ALLOWED_PLAIN, ALONE_DEBT, ALONE_LATE, ALONE_PLAIN, EXCEEDS_BURST, GLOBAL_LIMIT, LATE, LIMITED } from './script-reply.js';
