/**
 * The statuses a Redis script answers per decision, and the Lua that writes a decision's part of
 * the reply (limits-script.ts describes the whole reply): one place for the reply's layout, which
 * the GCRA script and the window script both write and script-batcher.ts reads.
 */

/** Decision statuses in the script's reply. */
export const ALLOWED = 0;
export const LIMITED = 1;
export const EXCEEDS_BURST = 2;
export const GLOBAL_LIMIT = 3;
export const LATE = 4;
/** An admission of exactly its cost that leaves the key open: [ALLOWED_PLAIN, remaining, resetUs]. */
export const ALLOWED_PLAIN = 5;
/**
 * A decision of a batch that raised an error (luaDecisionLoop): [ERROR]; its message is among
 * those that lead the reply, in the order of the decisions that failed.
 */
export const ERROR = 6;

/**
 * Lua that opens a batch script's loop over its decisions (the body follows, for decision `j`,
 * then LUA_DECISIONS_CLOSE): decision by decision, each one's error caught on its own. Found:
 * another program's value under one key (WRONGTYPE) raised out of the script and failed its whole
 * batch, and the decisions before it in the batch had been written: spends counted while their
 * callers were told the call failed (a caller who retried counted twice). Redis keeps the writes
 * a script made before an error. So the loop is a function run by pcall from decision `resume`
 * on: when decision `at` raises, the decisions before it are answered in `out` as Redis applied
 * them, decision `at` gets ERROR (its message kept in `errs`), and the loop goes on from the next
 * one. A decision reads every key it decides on before it writes any (the GCRA, fixed-window and
 * generic scripts all load every limit's state first), so a decision that failed on a key's type
 * wrote nothing, and no decision is applied twice or lost: nothing is tried again. Validating
 * every key's type first (TYPE) would have cost a command per key and a new command in the
 * limiter's ACL. A decision answers its part in `out` as its last step, so a failed one left no
 * part there. The loop's function reads `now`, `pad`, `out` and `arg` as locals of its own.
 */
export const LUA_DECISIONS_OPEN = `local errs, resume, at = nil, 0, 0
local function decisions(from)
local now, pad, out, arg = now, pad, out, arg
for j = from, nd - 1 do
  at = j`;

/** Lua that closes LUA_DECISIONS_OPEN's loop and runs it, each decision's error caught. */
export const LUA_DECISIONS_CLOSE = `end
end
while true do
  local ok, e = pcall(decisions, resume)
  if ok then break end
  if type(e) == 'table' then e = e.err end
  errs = errs or {}
  errs[#errs + 1] = tostring(e)
  out[#out + 1] = ${ERROR}
  resume = at + 1
end`;

/** Lua that returns a batch's `out`, led by the messages of its decisions that failed (`errs`), if any. */
export const LUA_RETURN_BATCH = `if errs then
  local m = #errs
  for i = #out, 1, -1 do out[i + m] = out[i] end
  for i = 1, m do out[i] = errs[i] end
end
return out`;

/**
 * Lua that appends a decided request to `out` after index `n`: [ALLOWED_PLAIN, remaining, reset]
 * when it was admitted for exactly its cost and leaves the key open, else all six fields. It reads
 * the Lua locals status, remaining, wait, reset, blocked, `granted` (the name of the granted count)
 * and cost. `indent` prefixes every line.
 */
export function luaPushDecision(granted: string, indent: string): string {
  return [
    `if status == ${ALLOWED} and blocked == 0 and ${granted} == cost then`,
    `  out[n + 1], out[n + 2], out[n + 3] = ${ALLOWED_PLAIN}, remaining, reset`,
    'else',
    `  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = status, remaining, wait, reset, blocked, ${granted}`,
    'end',
  ].map((line) => indent + line).join('\n');
}

/**
 * Lua that returns the reply of a script for one decision alone: its part, then `tail` (the Lua
 * expressions that end every reply), in one table made at its size. The part is told apart by
 * its length: none for a request that arrived late; for one admitted for exactly its cost that
 * leaves the key open, [debt] when `debt` is given (the Lua expression of a plan's one limit's
 * debt after it, in units: the client works out remaining and reset, exactly as the script
 * would), else [remaining, reset]; otherwise the six fields. Each integer of a reply costs the
 * client: ioredis 6 decodes [ALLOWED_PLAIN, remaining, reset, now] in 0.84 us, [debt, now] in
 * 0.54 (RESP decoding alone).
 */
export function luaReturnDecision(granted: string, debt: string | null, tail: string): string {
  return [
    `if status == ${LATE} then return { ${tail} } end`,
    `if status == ${ALLOWED} and blocked == 0 and ${granted} == cost then return { ${debt ?? 'remaining, reset'}, ${tail} } end`,
    `return { status, remaining, wait, reset, blocked, ${granted}, ${tail} }`,
  ].join('\n');
}

/** How many integers lead the reply of a script for one decision (luaReturnDecision), by kind. */
export const ALONE_LATE = 0;
export const ALONE_DEBT = 1;
export const ALONE_PLAIN = 2;

/** Lua that appends a request that arrived after its deadline (it spent nothing). */
export const LUA_PUSH_LATE = `out[#out + 1] = ${LATE}`;
