/**
 * The shared-memory layout of a sluice table: the one place where offsets live.
 *
 * ```
 * SharedArrayBuffer
 * +--------------------------- header: 128 int32 words (512 bytes) ---------------------------+
 * | magic | version | stripes | slotsPerStripe | slotWords | maxKeyBytes | t | tau | burst | ... |
 * | ... tickNs | staleSec | onFull | hashMode | hashValue | hashSeed | claimTimeoutMs | clock    |
 * | maxKeys | algorithm | limitCount | hasGlobal | maxLogSize | stateWords | ownerSeq | global  |
 * | stateOffset | width | forceLocked | class (which limiter class made the table)            |
 * | inlineKeyWords (key words a slot holds; a longer key's tail is in the key heap) | wideTick |
 * | @ byte 192: reclaim floor (float64 bits, one 64-bit word) | reclaim seq  (reclaim-floor.ts) |
 * | @ byte 256: float64 [permits, periodMs, burst] per limit, then the global limit's          |
 * +---------------------------------- stripe 0 ------------------------------------------------+
 * | slot 0 | slot 1 | ... | slot S-1 |     a key only ever lives in the stripe its hash picks,  |
 * +---------------------------------- stripe 1 ---------   so keys in different stripes never   |
 * | ...                                                      touch the same memory            |
 * +--------------------------------------------------------------------------------------------+
 *
 * +---------------------------------- global area (only with a global limit) -----------------+
 * | lock | lastSec | state words of the global limit                                            |
 * +---------------------------------- counters: COUNTER_CELLS cells of one cache line each -----+
 * | live | tombstones | displaced | (pad to 16 words)  | cell 1 | ... | cell 15                  |
 * +---------------------------------- reset marks: RESET_MARKS marks of MARK_WORDS int32 words --+
 * | done 0 | busy 0 | guard 0 | done 1 | busy 1 | guard 1 | ... | guard 1023  (reset-marks.ts)   |
 * +--------------------------------------------------------------------------------------------+
 *
 * The counters are the table's gauges, kept as it goes (a scrape reads 16 cells, not every slot):
 * each ctrl transition adds to the cell of its stripe (stripe mod COUNTER_CELLS), so threads on
 * different stripes rarely write one line. live: LIVE slots; tombstones: TOMB slots; displaced:
 * the sum over LIVE slots of their distance from their home slot (a hit's probe is 1 + that).
 *
 * The reset marks count the resets and blocks of keys (reset-marks.ts): a slot's mark is one of
 * RESET_MARKS, picked by a hash of its position, so a mark counts the resets of about one slot in
 * RESET_MARKS (those finished, and those under way). A reservation's cancel gives nothing once
 * its slot's mark moved. The guard is held by the one-limit path's give-backs (a reset, a reward,
 * a refund) while they write, so that a reset never lands between a refund's check of the mark
 * and its compareExchange.
 *
 * one slot (slotWords int32 words):
 * +-----------+-----------+-----------+-----------+-----------+-------------+--------------+------+
 * | ctrl      | tat       | lastSec   | hash      | keyBytes  | state words | key: UTF-8,  | ref  |
 * | state|gen | ticks mod | second of | 32-bit    | byte len  | (a pad word | zero-padded, | (see |
 * | or stamp  | 2^32, or  | last      | hash of   | of the    | first when  | its first    | be-  |
 * |           | the guard | admission | the whole | whole key | 8-aligned)  | inlineKey-   | low) |
 * |           |           |           | key       |           |             | Words words  |      |
 * +-----------+-----------+-----------+-----------+-----------+-------------+--------------+------+
 *
 * A slot holds min(maxKeyBytes, INLINE_KEY_BYTES) bytes of key. When maxKeyBytes is larger (the
 * default), the table has a key heap (key-heap.ts) and every slot ends with a reference word: 0,
 * or the heap record that holds the rest of the slot's long keys (a key of more than
 * INLINE_KEY_BYTES bytes keeps its first INLINE_KEY_BYTES in the slot, the rest in the record).
 * A small table (every slot's whole key within INLINE_ALL_BYTES, table-buffer.ts) holds its keys
 * whole instead, with no heap: inlineKeyWords is then ceil(maxKeyBytes / 4).
 *
 * The state sits next to the words every decision touches, the key after it (read only by
 * lookups that miss the thread's cache): a decision's reads and writes share a cache line in
 * most slots.
 *
 * `tat` is the GCRA state itself on the one-limit path (one GCRA limit, no global cap). For every
 * other configuration the state words hold the state and `tat` is the key's guard: the reclaim
 * guard of the lock-free engine (free value, reclaimer's token, a give-back's holder token or
 * DEAD; lockfree-engine.ts, rate/give-back-guard.ts) or the key's lock for the sliding log and
 * PolicyLimiter (slot-lock.ts). Keys of the lock-free engine keep one more state word after their
 * limits' words: the key's give-back epoch (rate/give-back-guard.ts).
 *
 * ctrl = payload << 2 | state
 *   EMPTY (0): free; ends every probe.               payload 0 (never used), or the generation
 *                                                    of its last occupant (a compaction cleared
 *                                                    its tombstone: SlotTable.compactStripe)
 *   BUSY  (1): being written by one inserter.        payload = cancelled (1 bit) | claim stamp
 *                                                    (ms modulo 2^29, 29 bits); a cancelled claim
 *                                                    can no longer be published (see table.ts)
 *   LIVE  (2): holds a key.                          payload = generation (30 bits)
 *   TOMB  (3): reclaimed, or an abandoned claim;     payload = generation of the last occupant
 *              may be reused; probes go past it.     (or of the abandoned claim)
 *
 * A slot's generation grows by one with each claim from EMPTY or TOMB, so a LIVE or TOMB word
 * does not come back to the same slot (short of 2^30 incarnations, or a claim taken over after
 * it expired, which starts from a generation made from its stamp).
 * ```
 */

/** Identifies a sluice table buffer ("SLCE"). */
export const MAGIC = 0x534c4345;
/** Bumped whenever this layout changes; `attach` refuses other versions. */
export const LAYOUT_VERSION = 16;

/** Header word indices. */
export const H_MAGIC = 0;
export const H_VERSION = 1;
export const H_STRIPES = 2;
export const H_SLOTS_PER_STRIPE = 3;
export const H_SLOT_WORDS = 4;
export const H_MAX_KEY_BYTES = 5;
export const H_INTERVAL_TICKS = 6;
export const H_TOLERANCE_TICKS = 7;
export const H_BURST = 8;
export const H_TICK_NS = 9;
export const H_STALE_SEC = 10;
export const H_ON_FULL = 11;
export const H_HASH_MODE = 12;
export const H_HASH_VALUE = 13;
export const H_HASH_SEED = 14;
export const H_CLAIM_TIMEOUT_MS = 15;
export const H_CLOCK_KIND = 16;
export const H_MAX_KEYS = 17;
export const H_ALGORITHM = 18;
export const H_LIMIT_COUNT = 19;
export const H_HAS_GLOBAL = 20;
export const H_MAX_LOG_SIZE = 21;
export const H_STATE_WORDS = 22;
/** Incremented by every attached instance: the owner id in its lock tokens. */
export const H_OWNER_SEQ = 23;
/** Word index of the global area (0 when there is no global limit). */
export const H_GLOBAL_BASE = 24;
/** Word offset of a slot's state words from its base (even when they hold a 64-bit word). */
export const H_STATE_OFFSET = 25;
/** Width of the one-limit GCRA path's TAT: 32 or 64 (0 for every other configuration). */
export const H_WIDTH = 26;
/** 1 when the table's decisions take the per-key lock even where they need none (benchmarks). */
export const H_FORCE_LOCKED = 27;
/** Which class made the table (TABLE_CLASSES): attach refuses a table of another class. */
export const H_CLASS = 28;
/**
 * Key words a slot holds (`INLINE_KEY_BYTES`, or fewer when maxKeyBytes is smaller); a table whose
 * maxKeyBytes is larger has a key heap and a reference word after them.
 */
export const H_INLINE_KEY_WORDS = 29;
/**
 * The one-limit GCRA path's width-64 tick in tenths of a ps when `maxBlockMs` chose it (a coarser
 * tick than the limit's own, to hold such a block); 0: the limit's own (limiter-config.ts).
 */
export const H_WIDE_TICK = 30;
/** Word index of the counters area (a multiple of CELL_WORDS: its cells start on cache lines). */
export const H_COUNTERS = 31;
/**
 * How old (ms) a claim, a lock token or a released lock word must be before an insert takes its
 * slot or a reclaim takes its key over: the table's one timing assumption (insert.ts,
 * REUSE_AFTER_TIMEOUTS and REUSE_FLOOR_MS). Set once, when the table is made.
 */
export const H_REUSE_AFTER_MS = 32;
/**
 * How keys find their slots: HASHED (a key's slot is in its probe chain: the slots are the hash
 * table) or SLAB (slots are handed out in the order keys arrive, and a directory of one word per
 * entry maps a key's hash to its slot; slab-layout.ts).
 */
export const H_LAYOUT = 33;
/** Slots in a SLAB table (in a HASHED one, H_STRIPES x H_SLOTS_PER_STRIPE). */
export const H_SLAB_SLOTS = 34;
/** Word index of a SLAB table's directory (its H_STRIPES stripes of H_SLOTS_PER_STRIPE entries). */
export const H_DIRECTORY = 35;
/** Word index of a SLAB table's tombstone sequences: one word per directory stripe (slab-layout.ts). */
export const H_DIRECTORY_SEQS = 36;
/**
 * Incremented by every thread's view of a SLAB table: where its search for free slots starts
 * (SlabDirectory), so that threads that insert at once take slots apart.
 */
export const H_SLAB_CURSORS = 37;
/** Word index of the reset marks (RESET_MARKS marks of MARK_WORDS words; reset-marks.ts). */
export const H_RESET_MARKS = 38;
/**
 * 1 when every key of a RateLimiter of windows keeps a block word after its limits (made with
 * `maxBlockMs`: algorithms/block-until.ts), or every pair under a PolicyLimiter's window rules
 * does (made with `maxBlockMs`: policy/rules.ts); 0 otherwise (limiter-config.ts).
 */
export const H_WINDOW_BLOCK = 39;
/**
 * `maxBlockMs` in whole seconds (rounded up), plus 1; 0: none kept. A PolicyLimiter made with it
 * (its GCRA rules take ticks that hold such a block: policy/rules.ts), or a RateLimiter whose
 * several GCRA limits needed ticks coarser than their own for it (limiter-config.ts): every thread
 * that attaches chooses the same ticks from it.
 */
export const H_BLOCK_SEC = 40;
/**
 * The reclaim floor (reclaim-floor.ts): the latest clock reading at which a reclaim judged a key
 * idle, as the bits of a float64 in one 64-bit word (BigInt64, byte 192: its own cache line, with
 * H_RECLAIM_SEQ), -Infinity until the first. A thread that inserts a key, or meets a key's new
 * incarnation, decides at no earlier reading.
 */
export const H_RECLAIM_FLOOR = 48;
/** Incremented after each raise of the reclaim floor: a thread loads the floor only when it moved. */
export const H_RECLAIM_SEQ = 50;
/** H_LAYOUT values. */
export const HASHED = 0;
export const SLAB = 1;
/** The classes a table may belong to, by their H_CLASS value (1-based: 0 is no class). */
export const TABLE_CLASSES = ['RateLimiter', 'PolicyLimiter', 'ConcurrencyLimiter', 'LocalTier'] as const;
export type TableClass = (typeof TABLE_CLASSES)[number];

/** Byte offset of the limits: float64 [permits, periodMs, burst] each, key limits then global. */
export const H_LIMITS_BYTE = 256;
/** At most this many limits per key (and one global). */
export const MAX_LIMITS = 8;
/** Header size in int32 words (512 bytes, so slots start on a cache-line boundary). */
export const HEADER_WORDS = 128;

/** Word offsets inside a slot. */
export const S_CTRL = 0;
export const S_TAT = 1;
export const S_LAST_SEC = 2;
export const S_HASH = 3;
export const S_KEY_BYTES = 4;
/** Words in a slot before its state (and its key, after the state: `keyOffsetOf` in table.ts). */
export const SLOT_HEADER_WORDS = 5;

/**
 * Bytes of key a slot holds: IPv4 and most IPv6 addresses, user ids, tenant names. Longer keys
 * keep the rest in the key heap.
 */
export const INLINE_KEY_BYTES = 24;

/** Slot states, the low two bits of ctrl. */
export const EMPTY = 0;
export const BUSY = 1;
export const LIVE = 2;
export const TOMB = 3;

/** Payloads (generation; cancelled flag and claim stamp) are 30 bits. */
export const PAYLOAD_MASK = 0x3fffffff;
/** A BUSY payload's claim stamp: ms modulo 2^29 (the stamp repeats after about 6.2 days). */
export const CLAIM_STAMP_MASK = 0x1fffffff;
/** The payload bit of a cancelled claim: its inserter's publish (and abandon) can only fail. */
export const CLAIM_CANCELLED = 0x20000000;

/**
 * The TAT value of a slot whose key is being reclaimed (or is gone). GCRA never stores it: a TAT
 * that would equal it is stored one tick later (conservative by 1 tick).
 */
export const DEAD = -0x80000000;

/** Builds a ctrl word. */
export function ctrlWord(state: number, payload: number): number {
  return ((payload & PAYLOAD_MASK) << 2) | state;
}

/**
 * The stripe of a key of hash `hash` in a table of `stripes` stripes: the hash's value scaled to
 * [0, stripes) (multiply and shift, Lemire's "fastrange"), so its top bits pick the stripe. Exact
 * in doubles: a table has at most 2^18 stripes (MAX_KEYS, MAX_SLOTS_PER_KEY and the shortest
 * stripe, 64 slots), so the product is below 2^50. A modulus would be a float division here: a
 * hash past 2^31 read unsigned is no int32, and V8 then calls fmod (measured: 10-20% of an
 * uncached check). table.ts's home slot takes its re-mixed top bits, an independent pick.
 */
export function stripeOfHash(hash: number, stripes: number): number {
  return Math.floor((hash >>> 0) * stripes * 2.3283064365386963e-10);
}

/** Slots allocated per requested key by default: at maxKeys live keys a stripe is 80% full on average. */
export const SLOTS_PER_KEY = 1.25;
/** The fewest slots per key a table may have (option slotsPerKey): 80% full at maxKeys live keys. */
export const MIN_SLOTS_PER_KEY = 1.25;
/** The most (option slotsPerKey). */
export const MAX_SLOTS_PER_KEY = 4;

/**
 * Slots per stripe for a table of `slotsPerKey` (a power of two; docs/design.md, "Stripes"): the
 * fuller the table at maxKeys live keys, the longer its stripes, so that no stripe overflows
 * before the table holds maxKeys (64 at 2 slots per key, 1,024 at 1.25). Tiny tables use one
 * stripe of all their slots.
 */
export function slotsPerStripeFor(slotsPerKey: number, slots: number): number {
  const length = slotsPerKey >= 2 ? 64 : slotsPerKey >= 1.5 ? 256 : 1024;
  return Math.min(length, 2 ** Math.ceil(Math.log2(slots)));
}

/** Cells of the counters area; a ctrl transition in stripe s counts in cell s mod COUNTER_CELLS. */
export const COUNTER_CELLS = 16;
/** Words per cell: one 64-byte cache line. */
export const CELL_WORDS = 16;
/** Word offsets inside a cell. */
export const C_LIVE = 0;
export const C_TOMBS = 1;
export const C_DISPLACED = 2;

/** Reset marks in a table (a power of two: a slot's is picked by its hash's top bits). */
export const RESET_MARKS = 1_024;
/** Words of one reset mark: done, busy, guard (reset-marks.ts). */
export const MARK_WORDS = 3;

/** Words of the global area before its state: lock and lastSec. */
export const GLOBAL_HEADER_WORDS = 2;
