/**
 * The SLAB table layout (layout.ts, H_LAYOUT): slots handed out in the order keys arrive, found
 * through a directory of one int32 word per entry.
 *
 * ```
 * SharedArrayBuffer
 * +---------------------------------- header (layout.ts) -------------------------------------+
 * +---------------------------------- slots: H_SLAB_SLOTS slots, layout.ts's slot layout -----+
 * | slot 0 | slot 1 | ... a new key takes the next free slot after its thread's last one, so   |
 * |                      keys that arrive together sit together, whatever their hashes       |
 * +-------------------------------- directory: H_STRIPES stripes of H_SLOTS_PER_STRIPE words -+
 * | entry | entry | ...  a key's entry is in its probe chain (linear, inside its stripe), as a |
 * |                      HASHED table's slot is; 16 entries share a cache line                 |
 * +---------------------------------- tombstone sequences: one word per directory stripe ----+
 * +---------------------------------- global area, counters (layout.ts) ----------------------+
 *
 * directory entry:
 *   EMPTY (0)      never used, or cleared by a compaction: ends every probe.
 *   REF            (slot + 1) << 9 | tag << 2 | 1: the entry of the slot's key. The tag is 7 bits
 *                  of the key's hash, so a probe reads a slot only on a tag match. The slot's own
 *                  ctrl word says whether that key is there yet (BUSY), there (LIVE), or gone
 *                  (TOMB, EMPTY: the entry is stale, and probes go past it).
 *   TOMB           seq << 2 | 3: a cleared reference; probes go past it, inserts may take it. seq
 *                  comes from its stripe's tombstone sequence (30 bits), so a tombstone word does
 *                  not come back to an entry (short of 2^30 tombstones in one stripe).
 * ```
 *
 * A slot's ctrl word keeps the meanings of layout.ts, with one difference: EMPTY means free with
 * no directory entry pointing at the slot (never used, or its entry cleared), TOMB free with
 * perhaps a stale entry still pointing at it. Only the thread holding a slot's claim (BUSY) writes an
 * entry that points at that slot: it clears the slot's stale entry, places the new one, and on
 * giving up clears it again. So a REF word is never written over by anyone but its slot's
 * claimer, and needs no generation of its own.
 */

/** Directory entry states, the low two bits. */
export const D_EMPTY = 0;
export const D_REF = 1;
export const D_TOMB = 3;

/** Bits of the key's hash kept in a REF entry. */
export const TAG_BITS = 7;
const TAG_MASK = (1 << TAG_BITS) - 1;
/** The slot field of a REF entry starts at this bit (slot + 1, 23 bits). */
const SLOT_SHIFT = TAG_BITS + 2;
/** The most slots a SLAB table may have: the REF word's slot field holds slot + 1. */
export const MAX_SLAB_SLOTS = 2 ** (32 - SLOT_SHIFT) - 1;

/** A REF entry's tag for a key of hash `hash`: its low bits (the home uses the top ones). */
export function tagOf(hash: number): number {
  return hash & TAG_MASK;
}

/** The REF entry of `slot` for a key of hash `hash`. */
export function refWord(slot: number, hash: number): number {
  return (((slot + 1) << SLOT_SHIFT) | (tagOf(hash) << 2) | D_REF) | 0;
}

/** The slot a REF entry points at. */
export function slotOfRef(entry: number): number {
  return (entry >>> SLOT_SHIFT) - 1;
}

/** Whether REF entry `entry` carries the tag of hash `hash`. */
export function tagMatches(entry: number, hash: number): boolean {
  return ((entry >>> 2) & TAG_MASK) === tagOf(hash);
}

/** The TOMB entry of tombstone sequence number `seq`. */
export function tombWord(seq: number): number {
  return ((seq & 0x3fffffff) << 2) | D_TOMB;
}

/**
 * Slots a SLAB table has for `maxKeys` keys, `hashedSlots` being what a HASHED table of the same
 * options has: maxKeys and a sixteenth more. The spare slots are the ones that inserts in
 * progress, stalled or dead inserters' claims, and reclaimed slots not yet handed out again hold
 * while maxKeys keys are live. A table of up to SMALL_TABLE keys has as many slots as a HASHED one
 * (they cost little, and a table holds the same keys whatever its layout).
 */
export function slabSlotsFor(maxKeys: number, hashedSlots: number): number {
  return maxKeys <= SMALL_TABLE ? hashedSlots : maxKeys + Math.ceil(maxKeys / 16);
}

/** Tables of up to this many keys have a HASHED table's slot count (slabSlotsFor). */
export const SMALL_TABLE = 1024;

/** Directory entries per slot of a SLAB table: its directory is at most half full. */
export const ENTRIES_PER_SLOT = 2;

/** Entries per directory stripe: 1,024, or all of a smaller directory (a power of two). */
export function directoryStripeFor(entries: number): number {
  return Math.min(1024, 2 ** Math.ceil(Math.log2(Math.max(entries, 8))));
}
