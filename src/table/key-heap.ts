/**
 * Where long keys keep the bytes their slot cannot hold: records in a growable SharedArrayBuffer
 * beside the table, made the first time a long key lands in a slot and kept by that slot.
 *
 * ```
 * key heap (growable SharedArrayBuffer, int32 words)
 * +-------+-----+-------+-------+----------------------+--------------------------+-----
 * | magic | top | (two words spare) | record: capacity | tail words (capacity) ... | ...
 * +-------+-----+-------+-------+----------------------+--------------------------+-----
 *   0       1     2       3       4 = HEAP_FIRST_RECORD
 * ```
 *
 * A slot of a table with a heap ends with a reference word: 0 for none, or the word index of its
 * record (see layout.ts). A record belongs to its slot for good. It is written only by an inserter
 * that holds the slot's claim, like the slot's own key words, and read only by lookups that then
 * re-read the slot's ctrl word (table.ts): the table's protocol covers it unchanged. A key whose
 * tail outgrows the slot's record gets a new record (at least twice as large); the old one is
 * left behind, so a slot leaves at most about twice its longest key behind it in all.
 *
 * Records are never freed: the heap grows up to `maxByteLength` (set from the table's capacity,
 * see `keyHeapBytes`), never shrinks, and a long key that needs a record when the heap is at its
 * limit finds no room (as when its stripe is full).
 *
 * Thread-safety: every method may run on any thread at once over the same buffer. An instance
 * holds a per-thread view of the buffer, so one instance belongs to one thread.
 */

/** Identifies a sluice key heap ("SLKH"). */
const HEAP_MAGIC = 0x534c4b48;
const K_MAGIC = 0;
/** The next free word: records are handed out by a compareExchange on it. */
const K_TOP = 1;
/** The first record's word: every reference word is 0 (none) or at least this. */
export const HEAP_FIRST_RECORD = 4;

/** Bytes a new heap starts with, and the least it grows by; it grows by an eighth past that. */
const GROW_BYTES = 1 << 16;
/** The most bytes any heap may reach: what every runtime sluice supports can reserve. */
export const MAX_HEAP_BYTES = 2 ** 31;

/**
 * The `maxByteLength` of a table's heap: every slot's records at their worst (a key of
 * `maxKeyBytes` after a chain of doubling shorter ones: 4x its tail), at most MAX_HEAP_BYTES.
 */
export function keyHeapBytes(slots: number, tailWords: number): number {
  return Math.min(MAX_HEAP_BYTES, (HEAP_FIRST_RECORD + slots * 4 * (tailWords + 1)) * 4);
}

/** A new, empty heap that may grow to `maxBytes`. Not shared yet. */
export function allocateKeyHeap(maxBytes: number): SharedArrayBuffer {
  const buffer = new SharedArrayBuffer(Math.min(GROW_BYTES, maxBytes), { maxByteLength: maxBytes });
  const w = new Int32Array(buffer, 0, HEAP_FIRST_RECORD);
  w[K_MAGIC] = HEAP_MAGIC;
  w[K_TOP] = HEAP_FIRST_RECORD;
  return buffer;
}

/** Throws `TypeError` unless `buffer` is a key heap. */
export function checkKeyHeap(buffer: unknown, name: string): SharedArrayBuffer {
  if (!(buffer instanceof SharedArrayBuffer) || !buffer.growable || buffer.byteLength < HEAP_FIRST_RECORD * 4 ||
    new Int32Array(buffer, 0, 1)[0] !== HEAP_MAGIC) {
    throw new TypeError(`${name} must be the key heap that came with the table (the handle's keys field): pass the handle whole`);
  }
  return buffer;
}

export class KeyHeap {
  readonly buffer: SharedArrayBuffer;
  /**
   * This thread's view of the buffer, as long as it was when last refreshed (a fixed-length view:
   * a view that tracks a growable buffer's length is slower to read). Refreshed by `view`.
   */
  #words: Int32Array;

  constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    this.#words = new Int32Array(buffer, 0, buffer.byteLength >>> 2);
  }

  /** The heap's bytes now (it only grows). */
  get byteLength(): number {
    return this.buffer.byteLength;
  }

  /**
   * A view holding at least the first `words` words, when the heap has them (else a shorter one:
   * its reads past the end give undefined, which no key word equals).
   */
  view(words: number): Int32Array {
    if (words > this.#words.length) this.#words = new Int32Array(this.buffer, 0, this.buffer.byteLength >>> 2);
    return this.#words;
  }

  /**
   * A new record of `capacity` tail words (its first word holds the capacity, written here):
   * its word index, or 0 when the heap cannot grow that far. The caller owns it alone.
   */
  allocate(capacity: number): number {
    const size = capacity + 1;
    const max = this.buffer.maxByteLength >>> 2;
    const w = this.#words;
    let top: number;
    for (;;) {
      // Atomics.load of top, then a compareExchange from exactly it: two callers never get the
      // same words. A caller that stops after winning leaves its words unused, nothing else.
      top = Atomics.load(w, K_TOP);
      if (top + size > max) return 0;
      if (Atomics.compareExchange(w, K_TOP, top, top + size) === top) break;
    }
    const end = top + size;
    // grow() may race with other threads' grows: each asks for more than it needs, and a grow to
    // less than the length already reached throws; then the length is checked again.
    while (this.buffer.byteLength < end * 4) {
      const want = Math.min(max * 4, Math.max(end * 4, this.buffer.byteLength + Math.max(GROW_BYTES, this.buffer.byteLength >>> 3)));
      try {
        this.buffer.grow(want);
      } catch {
        // Another thread grew it past `want` first (then it is long enough), or the memory could
        // not be had: the words stay reserved and unused, and the key finds no room.
        if (this.buffer.byteLength >= end * 4) break;
        return 0;
      }
    }
    const view = this.view(end);
    // A plain write: the record is the caller's alone until the slot that will refer to it is
    // published (a compareExchange, release, after this write).
    view[top] = capacity;
    return top;
  }
}
