import { keyWords } from './hash.js';
import { reuseAfterMsFor } from './insert.js';
import {
  GLOBAL_HEADER_WORDS, CELL_WORDS, COUNTER_CELLS, H_CLAIM_TIMEOUT_MS, H_CLASS, H_COUNTERS, H_GLOBAL_BASE, H_HASH_MODE, H_HASH_SEED, H_HASH_VALUE, H_MAGIC,
  H_INLINE_KEY_WORDS, H_REUSE_AFTER_MS, H_MAX_KEY_BYTES, H_MAX_KEYS, H_SLOT_WORDS, H_SLOTS_PER_STRIPE, H_STATE_OFFSET, H_STATE_WORDS, H_STRIPES,
  H_VERSION, HEADER_WORDS, INLINE_KEY_BYTES, LAYOUT_VERSION, MAGIC, SLOT_HEADER_WORDS, slotsPerStripeFor, TABLE_CLASSES, type TableClass,
  SLAB, H_SLAB_SLOTS, H_DIRECTORY, H_DIRECTORY_SEQS, H_LAYOUT, HASHED, H_RESET_MARKS, MARK_WORDS, RESET_MARKS,
} from './layout.js';
import { slabSlotsFor, ENTRIES_PER_SLOT, directoryStripeFor } from './slab-layout.js';
import { initReclaimFloor } from './reclaim-floor.js';

/**
 * A table's buffer as a whole: its allocation and header (`allocateTable`), the check that a
 * handle's buffer is a table of this layout and class (`checkTableBuffer`), and where a slot's
 * state and key words start. The slots themselves are table.ts's.
 */

/** Throws `TypeError` unless `buffer` holds a sluice table of this layout; returns its words. */
export function checkTableBuffer(buffer: SharedArrayBuffer, tableClass?: TableClass): Int32Array {
  const words = new Int32Array(buffer);
  if (words.length < HEADER_WORDS || words[H_MAGIC] !== MAGIC) {
    throw new TypeError('handle does not hold a sluice table (bad magic number)');
  }
  if (words[H_VERSION] !== LAYOUT_VERSION) {
    throw new TypeError(`handle holds table layout version ${words[H_VERSION]}, this sluice reads ${LAYOUT_VERSION}`);
  }
  // A handle's `kind` may be lost on the way (copied field by field, stripped): the table says.
  const made = TABLE_CLASSES[(words[H_CLASS] as number) - 1];
  if (tableClass !== undefined && made !== tableClass) {
    throw new TypeError(`handle.table was made by a ${made ?? 'unknown class'}, not a ${tableClass}: ` +
      `attach it with ${made === undefined ? 'the class that made it' : `${made}.attach`}`);
  }
  return words;
}

/** Offset of a slot's state words from its base, for the table in `words`. */
export function stateOffsetOf(words: Int32Array): number {
  return words[H_STATE_OFFSET] as number;
}

/** Offset of a slot's key words from its base, for the table in `words`: after the state words. */
export function keyOffsetOf(words: Int32Array): number {
  return (words[H_STATE_OFFSET] as number) + (words[H_STATE_WORDS] as number);
}

/** Key words a slot of the table in `words` holds. */
export function inlineKeyWordsOf(words: Int32Array): number {
  return words[H_INLINE_KEY_WORDS] as number;
}

/**
 * Whether the table in `words` keeps long keys' tails in a key heap: its maxKeyBytes is more
 * than its slots hold. Then every slot ends with a reference word (`keyRefOffsetOf`).
 */
export function hasKeyHeap(words: Int32Array): boolean {
  return keyWords(words[H_MAX_KEY_BYTES] as number) > inlineKeyWordsOf(words);
}

/** Offset of a slot's reference word (a table with a key heap): right after its key words. */
export function keyRefOffsetOf(words: Int32Array): number {
  return keyOffsetOf(words) + inlineKeyWordsOf(words);
}

/** The key words past the slot's that the longest key needs: the largest record's capacity. */
export function tailWordsOf(words: Int32Array): number {
  return keyWords(words[H_MAX_KEY_BYTES] as number) - inlineKeyWordsOf(words);
}

/** Number of slots in the table in `words`. */
export function slotCountOf(words: Int32Array): number {
  if (words[H_LAYOUT] === SLAB) return words[H_SLAB_SLOTS] as number;
  return (words[H_STRIPES] as number) * (words[H_SLOTS_PER_STRIPE] as number);
}

/**
 * A table whose slots can all hold a key of maxKeyBytes within this many bytes of key words keeps
 * every key whole in its slot and has no key heap. A key heap is a growable SharedArrayBuffer:
 * a reservation of address space and its own memory mappings, about two per heap. A process that
 * made many small limiters faster than the collector freed them ran out of mappings (found: the
 * explorer, some 200,000 tables of 4 keys in one process, aborted in V8 with "Array buffer
 * allocation failed" and a failed munmap). Small tables cost little either way; the heap is for
 * large ones, where it saves memory, and a process has few of those.
 */
export const INLINE_ALL_BYTES = 1 << 20;

/** Geometry and identity of a new table. */
export interface TableSpec {
  maxKeys: number;
  maxKeyBytes: number;
  hashSeed: number;
  /** When set, every key hashes to this value (tests force collisions with it). */
  forcedHash: number | undefined;
  claimTimeoutMs: number;
  /** How old a claim or a lock word must be before it is taken over for a reuse (default: reuseAfterMsFor(claimTimeoutMs)). */
  reuseAfterMs?: number;
  /** State words per slot, after its header (0 on the one-limit 32-bit GCRA path). */
  stateWords: number;
  /** Words of the global area at the end of the buffer (0 for none). */
  globalWords: number;
  /** Place the state words 8-byte aligned in every slot (they hold a 64-bit word). */
  align8?: boolean;
  /** The class the table is for: only that class attaches to it. */
  tableClass: TableClass;
  /** Slots allocated per key of maxKeys (option slotsPerKey; a HASHED table's). */
  slotsPerKey: number;
  /** How keys find their slots (layout.ts, H_LAYOUT); HASHED unless given. */
  layout?: typeof HASHED | typeof SLAB;
}

/**
 * Allocates and formats a table buffer. The caller fills its own header fields (H_INTERVAL_TICKS
 * and the like) before sharing the buffer. Not shared with any thread yet: plain writes suffice.
 */
export function allocateTable(spec: TableSpec): SharedArrayBuffer {
  const slab = spec.layout === SLAB;
  let slots: number;
  let slotsPerStripe: number;
  let stripes: number;
  const slotsWanted = Math.max(Math.ceil(spec.maxKeys * spec.slotsPerKey), 2);
  slotsPerStripe = slotsPerStripeFor(spec.slotsPerKey, slotsWanted);
  stripes = Math.ceil(slotsWanted / slotsPerStripe);
  slots = stripes * slotsPerStripe;
  if (slab) {
    // The slots are handed out in arrival order; the stripes are the directory's (slab-layout.ts).
    slots = slabSlotsFor(spec.maxKeys, slots);
    const entries = slots * ENTRIES_PER_SLOT;
    slotsPerStripe = directoryStripeFor(entries);
    stripes = Math.ceil(entries / slotsPerStripe);
  }
  // With align8, the state starts on an even word of a slot with an even number of words: slots
  // start at even words (the header is 128 words), so the state is 8-byte aligned in every slot.
  // The state right after the slot's header, the key after it: a decision reads and writes the
  // header and the state, which then share a cache line in most slots, and its writes do not
  // land on the line holding the next slot's header (found: two GCRA limits on two workers ran
  // 6% faster this way than with the state after the key).
  let stateOffset = SLOT_HEADER_WORDS;
  if (spec.align8 === true) stateOffset += stateOffset & 1;
  // A slot holds at most INLINE_KEY_BYTES of key; a longer maxKeyBytes adds the reference word
  // and a key heap. A small table holds its keys whole instead (see INLINE_ALL_BYTES).
  const wholeWords = keyWords(spec.maxKeyBytes);
  const inlineWords = slots * wholeWords * 4 <= INLINE_ALL_BYTES ? wholeWords : keyWords(Math.min(spec.maxKeyBytes, INLINE_KEY_BYTES));
  const refWords = keyWords(spec.maxKeyBytes) > inlineWords ? 1 : 0;
  let slotWords = stateOffset + spec.stateWords + inlineWords + refWords;
  if (spec.align8 === true) slotWords += slotWords & 1;
  const slotArea = slots * slotWords;
  // A SLAB table's directory and its stripes' tombstone sequences follow the slots.
  // Rounded to whole cache lines: what follows (the global area's 64-bit words) stays aligned.
  const directoryWords = slab ? Math.ceil((stripes * slotsPerStripe + stripes) / CELL_WORDS) * CELL_WORDS : 0;
  const globalWords = spec.globalWords > 0 ? GLOBAL_HEADER_WORDS + spec.globalWords : 0;
  // The counters start on a cache line (the buffer's start is page-aligned).
  const counters = Math.ceil((HEADER_WORDS + slotArea + directoryWords + globalWords) / CELL_WORDS) * CELL_WORDS;
  // The reset marks follow the counters (whole cache lines).
  const resetMarks = counters + COUNTER_CELLS * CELL_WORDS;
  const bytes = (resetMarks + MARK_WORDS * RESET_MARKS) * 4;
  let buffer: SharedArrayBuffer;
  try {
    buffer = new SharedArrayBuffer(bytes);
  } catch (e) {
    throw new RangeError(
      `options.maxKeys ${spec.maxKeys} needs a table of ${bytes} bytes (${slotWords * 4} per slot, ${slots} slots), ` +
        `which could not be allocated: lower maxKeys, slotsPerKey or the per-key state (${e instanceof Error ? e.message : String(e)})`,
      { cause: e },
    );
  }
  const w = new Int32Array(buffer);
  w[H_MAGIC] = MAGIC;
  w[H_VERSION] = LAYOUT_VERSION;
  w[H_STRIPES] = stripes;
  w[H_SLOTS_PER_STRIPE] = slotsPerStripe;
  w[H_SLOT_WORDS] = slotWords;
  w[H_MAX_KEY_BYTES] = spec.maxKeyBytes;
  w[H_MAX_KEYS] = spec.maxKeys;
  w[H_HASH_MODE] = spec.forcedHash === undefined ? 0 : 1;
  w[H_HASH_VALUE] = spec.forcedHash ?? 0;
  w[H_HASH_SEED] = spec.hashSeed;
  w[H_CLAIM_TIMEOUT_MS] = spec.claimTimeoutMs;
  w[H_REUSE_AFTER_MS] = spec.reuseAfterMs ?? reuseAfterMsFor(spec.claimTimeoutMs);
  w[H_STATE_WORDS] = spec.stateWords;
  w[H_STATE_OFFSET] = stateOffset;
  w[H_CLASS] = TABLE_CLASSES.indexOf(spec.tableClass) + 1;
  w[H_GLOBAL_BASE] = globalWords > 0 ? HEADER_WORDS + slotArea + directoryWords : 0;
  w[H_LAYOUT] = slab ? SLAB : HASHED;
  if (slab) {
    w[H_SLAB_SLOTS] = slots;
    w[H_DIRECTORY] = HEADER_WORDS + slotArea;
    w[H_DIRECTORY_SEQS] = HEADER_WORDS + slotArea + stripes * slotsPerStripe;
  }
  w[H_INLINE_KEY_WORDS] = inlineWords;
  w[H_COUNTERS] = counters;
  w[H_RESET_MARKS] = resetMarks;
  initReclaimFloor(buffer);
  return buffer;
}
