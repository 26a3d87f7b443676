/**
 * The shared-memory layout of a sluice table: the one place where offsets live.
 *
 * ```
 * SharedArrayBuffer
 * +--------------------------- header: 64 int32 words (256 bytes) ----------------------------+
 * | magic | version | stripes | slotsPerStripe | slotWords | maxKeyBytes | t | tau | burst | ... |
 * | ... tickNs | staleSec | onFull | hashMode | hashValue | hashSeed | claimTimeoutMs | clock    |
 * | float64 permits @ byte 192 | float64 periodMs @ byte 200                                   |
 * +---------------------------------- stripe 0 ------------------------------------------------+
 * | slot 0 | slot 1 | ... | slot S-1 |     a key only ever lives in the stripe its hash picks,  |
 * +---------------------------------- stripe 1 ---------   so keys in different stripes never   |
 * | ...                                                      touch the same memory            |
 * +--------------------------------------------------------------------------------------------+
 *
 * one slot (slotWords int32 words):
 * +-------------+-------------+-------------+-------------+-------------+------------------------+
 * | ctrl        | tat         | lastSec     | hash        | keyBytes    | key: UTF-8, zero-padded |
 * | state|gen   | ticks mod   | second of   | 32-bit hash | byte length | ceil(maxKeyBytes / 4)  |
 * | or stamp    | 2^32 (CAS)  | last admit  | of the key  | of the key  | words                  |
 * +-------------+-------------+-------------+-------------+-------------+------------------------+
 *
 * ctrl = payload << 2 | state
 *   EMPTY (0): never used; ends every probe.        payload 0
 *   BUSY  (1): being written by one inserter.        payload = claim stamp (ms, 30 bits)
 *   LIVE  (2): holds a key.                          payload = generation (30 bits)
 *   TOMB  (3): reclaimed; may be reused.             payload = generation of the last occupant
 * ```
 *
 * Thread-safety: constants only.
 */

/** Identifies a sluice table buffer ("SLCE"). */
export const MAGIC = 0x534c4345;
/** Bumped whenever this layout changes; `attach` refuses other versions. */
export const LAYOUT_VERSION = 1;

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
/** Byte offsets of the two float64 header fields. */
export const H_PERMITS_BYTE = 192;
export const H_PERIOD_MS_BYTE = 200;
/** Header size in int32 words (256 bytes, so slots start on a cache-line boundary). */
export const HEADER_WORDS = 64;

/** Word offsets inside a slot. */
export const S_CTRL = 0;
export const S_TAT = 1;
export const S_LAST_SEC = 2;
export const S_HASH = 3;
export const S_KEY_BYTES = 4;
export const S_KEY = 5;
/** Words in a slot before the key. */
export const SLOT_HEADER_WORDS = 5;

/** Slot states, the low two bits of ctrl. */
export const EMPTY = 0;
export const BUSY = 1;
export const LIVE = 2;
export const TOMB = 3;

/** Payloads (generation, claim stamp) are 30 bits. */
export const PAYLOAD_MASK = 0x3fffffff;

/**
 * The TAT value of a slot whose key is being reclaimed (or is gone). GCRA never stores it: a TAT
 * that would equal it is stored one tick later (conservative by 1 tick).
 */
export const DEAD = -0x80000000;

/** Builds a ctrl word. */
export function ctrlWord(state: number, payload: number): number {
  return ((payload & PAYLOAD_MASK) << 2) | state;
}

/** Slots per stripe: a power of two, at most 64 (see docs/design.md for the sizing). */
export const MAX_SLOTS_PER_STRIPE = 64;
/** Slots allocated per requested key: at maxKeys live keys a stripe is half full on average. */
export const SLOTS_PER_KEY = 2;

/** Bytes a table needs for the given geometry. */
export function tableBytes(stripes: number, slotsPerStripe: number, slotWords: number): number {
  return (HEADER_WORDS + stripes * slotsPerStripe * slotWords) * 4;
}
