import type { RedisLimit } from './redis-limits.js';
import { LATE, LUA_DECISIONS_CLOSE, LUA_DECISIONS_OPEN, LUA_PUSH_LATE, LUA_RETURN_BATCH, luaPushDecision, luaReturnDecision } from './script-reply.js';

/**
 * The script of a plan whose every limit is a fixed window, with its decisions written out as
 * straight-line code per limit, as lua-gcra.ts does for GCRA: each limit's period and permits
 * are constants, its state is read once into locals, and nothing on the way to a decision calls
 * a function of the script's own. It decides exactly as the generic script's FIXED algorithm
 * (lua-algorithms.ts) on the same stored states, "window:count[:until:born]" (a differential test
 * runs both on one server: test/redis/redis-fixed-window-script.test.ts).
 *
 * Only decisions take this path. A refund, a reward, a penalty and a block are rare: they run the
 * generic algorithms (`rare`, the Lua of a function that makes a handler for them), which the
 * script defines the first time one of them comes, so a call of decisions alone defines none.
 *
 * Measured (INFO commandstats, usec of EVALSHA over 20,000 decisions on keys never seen, a fixed
 * window of 1 an hour, alternating rounds, median of 5): through RedisRateLimiter, 35.4 µs of
 * Redis's CPU a decision with one call in flight and 13.6 with 16 for the generic script, 20.7
 * and 8.9 for this one (rate-limiter-flexible's RateLimiterRedis: 14.8 and 6.0). In batches of 4,
 * 3.1 µs of the 7.2 a decision costs is the SET of a new key with its expiry.
 *
 * `rare` is the Lua of an expression whose value is a function (j, cost, deadline, want) that
 * applies a refund or a control of decision j (see limits-script.ts, rareHandler).
 */
export function fixedWindowScript(keyLimits: readonly RedisLimit[], global: readonly RedisLimit[], single: boolean, rare: string): string {
  const nl = keyLimits.length;
  const all = [...keyLimits, ...global];
  const lines: string[] = [];
  const emit = (s: string): void => {
    lines.push(s);
  };
  /** Limit i's key in decision j of a batch (the cap's after every decision's), or in a single call. */
  const keyOf = (i: number): string => {
    if (single) return `KEYS[${i + 1}]`;
    return i < nl ? `KEYS[j * ${nl} + ${i + 1}]` : `KEYS[nd * ${nl} + ${i - nl + 1}]`;
  };
  const period = (i: number): number => (all[i] as RedisLimit).args[0];
  const permits = (i: number): number => (all[i] as RedisLimit).args[1];

  // A refund, a reward, or a control that is not late: the generic algorithms (`rare`). The
  // order of the tests is the generic script's: a refund is never late.
  const isRare = 'cost < 0 or (want < 0 and not (deadline > 0 and now > deadline))';
  // Functions the decisions call, as locals: a global's function is two table lookups a call.
  // Windows are written with %d, which costs Redis less than %.0f: each is a whole number below
  // 2^53 (but under the tests' time). A count is written with %.0f, as the generic script does:
  // a stored value that is not a whole count (not one this script writes) is rounded alike.
  // `now` (a new state's birth, bornText) is whole but under the tests' time, where it is written
  // as %.0f writes it, formatted once per call at most.
  emit(`local floor, ceil, max, min, format, call = math.floor, math.ceil, math.max, math.min, string.format, redis.call
local bornCache = nil
local function bornText()
  if bornCache == nil then
    if now % 1 == 0 then bornCache = format('%d', now) else bornCache = format('%.0f', now) end
  end
  return bornCache
end`);
  if (single) {
    emit(`local nd = 1
local cost, deadline, want = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0
local status, remaining, wait, reset, blocked, spent = 0, 0, 0, 0, 0, 0
if ${isRare} then
  (${rare})(0, cost, deadline, want)
elseif deadline > 0 and now > deadline then
  status = ${LATE}
else`);
  } else {
    emit(`local out = {}
local rare = nil
${LUA_DECISIONS_OPEN}
  local cost, deadline, want = arg() + 0, arg() + 0, arg() + 0
  local n = #out
  if ${isRare} then
    if rare == nil then rare = ${rare} end
    rare(j, cost, deadline, want)
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = 0, 0, 0, 0, 0, 0
  elseif deadline > 0 and now > deadline then
    ${LUA_PUSH_LATE}
  else
  local status, remaining, wait, reset, blocked, spent = 0, 0, 0, 0, 0, 0`);
  }

  /**
   * Lua that declares limit i's state (w, c, a, u; and t when `withTail`) read from its key. One
   * match reads the window, the count, the tail and the block's end in it.
   */
  const load = (i: number, withTail: boolean, indent: string): string => [
    `local w${i}, c${i}, a${i}, u${i}${withTail ? `, t${i}` : ''} = floor(now / ${period(i)}), 0, false, 0${withTail ? ', nil' : ''}`,
    'do',
    `  local v = call('GET', ${keyOf(i)})`,
    '  if v then',
    "    local fw, fc, tail, fu = string.match(v, '^([^:]+):([^:]+)(:?([^:]*).*)$')",
    '    fw = fw + 0',
    `    if fw == w${i} then c${i} = fc + 0 elseif fw > w${i} then w${i}, c${i}, a${i} = fw, fc + 0, true end`,
    ...(withTail ? [`    t${i} = tail`] : []),
    "    if fu ~= '' then",
    '      local x = tonumber(fu)',
    `      if x and x > now then u${i} = x end`,
    '    end',
    '  end',
    'end',
  ].map((line) => indent + line).join('\n');
  // Each limit's state at now, as FIXED.load reads it: w the window (a later stored one when this
  // server's clock went back, `a` then true), c its count, u the end of a block when ahead of
  // now (else 0), t the stored tail after the count (nil for a missing key).
  all.forEach((_, i) => emit(load(i, true, '  ')));

  /**
   * Lua that sets `ok` and `w` to whether `c` more pass limit i once `spent` is counted, and the
   * wait before they would (-1: never), as FIXED.check does.
   */
  const check = (i: number, c: string, spent: string, indent: string): string => [
    `local ok, w = true, 0`,
    `if ${c} > ${permits(i)} then ok, w = false, -1`,
    'else',
    // Written as the generic check's negation: a count that is not a number refuses there.
    `  if not (c${i} + ${spent} + ${c} <= ${permits(i)}) then ok, w = false, (w${i} + 1) * ${period(i)} - now`,
    `  elseif a${i} then ok, w = false, w${i} * ${period(i)} - now end`,
    `  if u${i} > now then ok = false; if u${i} - now > w then w = u${i} - now end end`,
    'end',
  ].map((line) => indent + line).join('\n');

  // The key's limits, then the cap's; a probe (cost 0) passes.
  emit(`  local keyRefused, keyNever, keyWait, capRefused, capNever, capWait = false, false, 0, false, false, 0`);
  all.forEach((_, i) => {
    const who = i < nl ? 'key' : 'cap';
    emit(`  do
${check(i, 'cost', '0', '    ')}
    if not ok then
      ${who}Refused = true
      if w < 0 then ${who}Never = true elseif w > ${who}Wait then ${who}Wait = w end
    end
  end`);
  });
  emit(`  local upto = ${all.length}
  if cost == 0 then
  elseif keyRefused then
    if keyNever then status, wait = 2, -1 else status, wait = 1, keyWait end
    upto = ${nl}
  elseif capRefused then
    if capNever then status, wait = 3, -1 else status, wait = 3, capWait end
  end
  if status == 0 then spent = cost end`);

  /** Lua for what limit i still holds once `spent` is counted (FIXED.remaining). */
  const left = (i: number, spent: string): string =>
    `((a${i} or u${i} > 0) and 0 or max(0, ${permits(i)} - c${i} - ${spent}))`;
  // A lease: as much of want as every limit still holds (at least the cost, which passed).
  emit(`  if status == 0 and want > cost then
    local room = want`);
  all.forEach((_, i) => emit(`    room = min(room, ${left(i, '0')})`));
  emit(`    spent = max(cost, room)
  end`);

  // Remaining from each limit up to `upto` (the key's alone when they refused); reset and the
  // refusal cache's block from the key's limits.
  all.forEach((_, i) => {
    const body: string[] = [];
    body.push(i === 0 ? `remaining = ${left(i, 'spent')}` : `do local r = ${left(i, 'spent')}; if r < remaining then remaining = r end end`);
    if (i < nl) {
      body.push(
        `do local r = 0; if c${i} + spent > 0 then r = (w${i} + 1) * ${period(i)} - now end; r = max(r, u${i} - now); if r > reset then reset = r end end`,
        `do`,
        check(i, '1', 'spent', '  '),
        `  if not ok and w > blocked then blocked = w end`,
        `end`,
      );
    }
    const indent = i < nl ? '  ' : '    ';
    if (i === nl && nl > 0) emit(`  if upto > ${nl} then`);
    emit(body.map((line) => indent + line).join('\n'));
  });
  if (global.length > 0 && nl > 0) emit('  end');

  // An admission writes every limit: its count, the tail as it was (a state made now is born
  // now), and an expiry at the later of its window's end and its block's.
  emit('  if spent > 0 then');
  all.forEach((_, i) => {
    emit(`    do
      local v
      if t${i} == nil then v = format('%d:%.0f:0:', w${i}, c${i} + spent) .. bornText()
      else v = format('%d:%.0f', w${i}, c${i} + spent) .. t${i} end
      call('SET', ${keyOf(i)}, v, 'PX', max(1, ceil((max((w${i} + 1) * ${period(i)}, u${i}) - now) / 1000)) + pad)
    end`);
  });
  emit('  end');

  if (!single) {
    emit(luaPushDecision('spent', '    '));
    emit(`  end\n${LUA_DECISIONS_CLOSE}`);
  } else {
    emit('end');
  }

  // The cap after the whole batch: how long it refuses every request.
  if (global.length > 0) {
    emit('local capBlocked = 0');
    for (let i = nl; i < all.length; i++) {
      emit(`do
${load(i, false, '  ')}
${check(i, '1', '0', '  ')}
  if not ok and w > capBlocked then capBlocked = w end
end`);
    }
  }
  const tail = global.length > 0 ? 'capBlocked, now' : 'now';
  if (single) emit(luaReturnDecision('spent', null, tail));
  else emit(`${global.length > 0 ? 'out[#out + 1] = capBlocked\n' : ''}out[#out + 1] = now\n${LUA_RETURN_BATCH}`);
  return lines.join('\n');
}
