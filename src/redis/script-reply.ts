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

/** Lua that appends a request that arrived after its deadline (it spent nothing). */
export const LUA_PUSH_LATE = `out[#out + 1] = ${LATE}`;
