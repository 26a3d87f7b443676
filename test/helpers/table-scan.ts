// Reading a table straight from its shared memory, for the churn and storm tests: which keys are
// live (and how many copies of each), and what compaction left behind. Every limiter class keeps
// the reclaim marker (DEAD) in a slot's `tat` word, so one reader serves them all. Snapshots:
// call them while no other thread writes, or read the result as such.
import { BUSY, CLAIM_CANCELLED, DEAD, EMPTY, H_SLOT_WORDS, HEADER_WORDS, LIVE, S_CTRL, S_HASH, S_KEY_BYTES, S_TAT } from '../../src/table/layout.js';
import { inlineKeyWordsOf, keyOffsetOf, keyRefOffsetOf, slotCountOf } from '../../src/table/table-buffer.js';

/** Slots of `table`, and the first word of each. */
function* slotBases(table: SharedArrayBuffer): Generator<number> {
  const w = new Int32Array(table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const capacity = slotCountOf(w);
  for (let slot = 0; slot < capacity; slot++) yield HEADER_WORDS + slot * slotWords;
}

/**
 * The key in the slot at `base`, as the table spells it: its bytes in the slot, and a long key's
 * tail from the slot's record in `keys`, the table's key heap (the handle's `keys`).
 */
export function keyAt(table: SharedArrayBuffer, base: number, keys: SharedArrayBuffer | null = null): string {
  const w = new Int32Array(table);
  const length = w[base + S_KEY_BYTES] as number;
  const inlineBytes = inlineKeyWordsOf(w) * 4;
  const start = (base + keyOffsetOf(w)) * 4;
  const head = new Uint8Array(table).slice(start, start + Math.min(length, inlineBytes));
  if (length <= inlineBytes) return new TextDecoder().decode(head);
  if (keys === null) throw new Error('a long key is in the table: pass its key heap');
  const ref = w[base + keyRefOffsetOf(w)] as number;
  const tail = new Uint8Array(keys).slice((ref + 1) * 4, (ref + 1) * 4 + length - inlineBytes);
  return new TextDecoder().decode(Buffer.concat([head, tail]));
}

/** Live slots (LIVE and not being reclaimed) per key, as the table spells the key. */
export function liveCopies(table: SharedArrayBuffer, keys: SharedArrayBuffer | null = null): Map<string, number> {
  const w = new Int32Array(table);
  const copies = new Map<string, number>();
  for (const base of slotBases(table)) {
    if (((Atomics.load(w, base + S_CTRL)) & 3) !== LIVE || Atomics.load(w, base + S_TAT) === DEAD) continue;
    const key = keyAt(table, base, keys);
    copies.set(key, (copies.get(key) ?? 0) + 1);
  }
  return copies;
}

/** The keys that have more than one live copy, with their counts. */
export function duplicateKeys(table: SharedArrayBuffer, keys: SharedArrayBuffer | null = null): [string, number][] {
  return [...liveCopies(table, keys)].filter(([, n]) => n > 1);
}

/** The distinct hashes held by live slots (a forced hash leaves exactly one). */
export function liveHashes(table: SharedArrayBuffer): Set<number> {
  const w = new Int32Array(table);
  const hashes = new Set<number>();
  for (const base of slotBases(table)) {
    if ((Atomics.load(w, base + S_CTRL) & 3) === LIVE) hashes.add(Atomics.load(w, base + S_HASH));
  }
  return hashes;
}

/**
 * EMPTY slots that once held a key: a fresh slot is EMPTY with generation 0, and only a
 * compaction (SlotTable.compactStripe) turns a tombstone back into EMPTY, keeping its generation.
 * (In a SLAB table, a freed slot whose directory entry was cleared: slab-layout.ts.)
 */
export function compactedSlots(table: SharedArrayBuffer): number {
  const w = new Int32Array(table);
  let n = 0;
  for (const base of slotBases(table)) {
    const c = Atomics.load(w, base + S_CTRL);
    if ((c & 3) === EMPTY && c >>> 2 !== 0) n++;
  }
  return n;
}

/**
 * Claims (BUSY slots) that were not cancelled. Once every inserter has returned there must be
 * none: an insert publishes or abandons its claim before it returns, and only a claim cancelled
 * by another inserter (its own inserter stalled past claimTimeoutMs) stays BUSY, until a sweep
 * frees it 30 timeouts later.
 */
export function openClaims(table: SharedArrayBuffer): number {
  const w = new Int32Array(table);
  let n = 0;
  for (const base of slotBases(table)) {
    const c = Atomics.load(w, base + S_CTRL);
    if ((c & 3) === BUSY && ((c >>> 2) & CLAIM_CANCELLED) === 0) n++;
  }
  return n;
}
