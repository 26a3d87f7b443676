/**
 * Key encoding and hashing. A key is stored as its UTF-8 bytes, zero-padded to whole int32
 * words, and hashed word by word with MurmurHash3.
 *
 * Thread-safety: a `KeyEncoder` owns scratch buffers and belongs to one limiter instance on one
 * thread; the functions are pure.
 */
const encoder = new TextEncoder();

/** Encodes keys into reusable scratch memory, without allocating per key. */
export class KeyEncoder {
  /** The encoded key, `words` int32 words long, zero-padded. */
  readonly words: Int32Array;
  readonly #bytes: Uint8Array;
  readonly #maxKeyBytes: number;

  constructor(maxKeyBytes: number) {
    this.#maxKeyBytes = maxKeyBytes;
    // One spare byte lets encodeInto report a key that is exactly one byte too long.
    const buffer = new ArrayBuffer(Math.ceil((maxKeyBytes + 4) / 4) * 4);
    this.#bytes = new Uint8Array(buffer);
    this.words = new Int32Array(buffer);
  }

  /**
   * Encodes `key`; returns its byte length, or -1 when it is longer than `maxKeyBytes`.
   * After a successful call, `words` holds the key. `key` must be well-formed UTF-16 (the caller,
   * `SlotIndex.locate`, checks): a lone surrogate would encode as U+FFFD, like other keys do.
   */
  encode(key: string): number {
    if (key.length > this.#maxKeyBytes) return -1; // UTF-8 never has fewer bytes than UTF-16 units
    this.words.fill(0);
    const { read, written } = encoder.encodeInto(key, this.#bytes.subarray(0, this.#maxKeyBytes + 1));
    if (read !== key.length || written > this.#maxKeyBytes) return -1;
    return written;
  }
}

/** Number of int32 words holding `bytes` bytes of key. */
export function keyWords(bytes: number): number {
  return (bytes + 3) >>> 2;
}

/**
 * Hashes the first `count` words of `words` with `seed` (MurmurHash3 x86_32 over whole words);
 * always a 32-bit signed integer. Every input bit reaches every output bit before the next word
 * is mixed in, so keys that differ in one digit still spread evenly over the stripes.
 */
export function hashWords(words: Int32Array, count: number, seed: number): number {
  let h = seed | 0;
  for (let i = 0; i < count; i++) {
    let k = Math.imul(words[i] as number, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  h ^= count * 4;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}
