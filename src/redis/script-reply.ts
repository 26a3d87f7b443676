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
