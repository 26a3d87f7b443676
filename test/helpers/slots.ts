// Where a key lives in a table, read from the outside (a snapshot, for tests that stage a reclaim
// or a reuse of its slot).
import { H_SLOT_WORDS, H_STATE_OFFSET, HEADER_WORDS, LIVE, S_CTRL, S_KEY_BYTES, S_TAT } from '../../src/table/layout.js';
import { keyOffsetOf, slotCountOf } from '../../src/table/table-buffer.js';
import type { PolicyLimiter, PolicyRequest } from '../../src/index.js';

/** The first word of the live slot holding the table key `key` (as the table encodes it), or -1. */
export function slotBaseOf(table: SharedArrayBuffer, key: string): number {
  const w = new Int32Array(table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const want = new TextEncoder().encode(key);
  const end = HEADER_WORDS + slotCountOf(w) * slotWords;
  for (let base = HEADER_WORDS; base < end; base += slotWords) {
    if (((w[base + S_CTRL] as number) & 3) !== LIVE || w[base + S_KEY_BYTES] !== want.length) continue;
    const bytes = new Uint8Array(w.buffer, (base + keyOffsetOf(w)) * 4, want.length);
    if (bytes.every((b, i) => b === want[i])) return base;
  }
  return -1;
}

/** The lock word index of the live slot holding `key`; throws when there is none. */
export function lockIndexOf(table: SharedArrayBuffer, key: string): number {
  const base = slotBaseOf(table, key);
  if (base < 0) throw new Error(`no live slot for ${key}`);
  return base + S_TAT;
}

/** A ConcurrencyLimiter key's slot: its ctrl word and its place words. */
export function slotOf(table: SharedArrayBuffer, key: string, maxInFlight: number): { base: number; ctrl: number; places: number[] } {
  const w = new Int32Array(table);
  const base = lockIndexOf(table, key) - S_TAT;
  const at = base + (w[H_STATE_OFFSET] as number);
  return { base, ctrl: w[base + S_CTRL] as number, places: Array.from(w.subarray(at, at + maxInFlight)) };
}

/** The number (from 0) of the live slot holding `key`, or -1. */
export function slotNumberOf(table: SharedArrayBuffer, key: string): number {
  const base = slotBaseOf(table, key);
  return base < 0 ? -1 : (base - HEADER_WORDS) / (new Int32Array(table)[H_SLOT_WORDS] as number);
}

/**
 * A user `v<i>` whose pair (user, `api`) takes the same slot in an empty table as `key` (a table
 * key, as `slotBaseOf` reads it) takes in another: once `key` is reclaimed, that pair inserted
 * next reuses its slot. `make` builds a fresh limiter with the same options each time. Throws
 * when none of 2,000 candidates does.
 */
export function userSharingSlot(make: () => PolicyLimiter, first: PolicyRequest, key: string): string {
  const probe = make();
  probe.tryAcquire(first, 0);
  const home = slotNumberOf(probe.handle.table, key);
  for (let i = 0; i < 2000; i++) {
    const user = `v${i}`;
    const p = make();
    p.tryAcquire({ user, api: first.api }, 0);
    if (slotNumberOf(p.handle.table, `${user.length}:${user}${first.api}`) === home) return user;
  }
  throw new Error(`no user of 2,000 shares ${key}'s slot`);
}
