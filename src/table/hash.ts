import { isWellFormed } from '../config/check.js';

/**
 * Key encoding and hashing. A key is stored as its UTF-8 bytes, zero-padded to whole int32
 * words, and hashed word by word with MurmurHash3.
 *
 * Thread-safety: a `KeyEncoder` owns scratch buffers and belongs to one limiter instance on one
 * thread; the functions are pure.
 */
const encoder = new TextEncoder();

/** Whether int32 words hold their bytes lowest first (every platform Node runs on does). */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** `KeyEncoder.encode`: the key is longer than `maxKeyBytes`. */
export const TOO_LONG = -1;
/** `KeyEncoder.encode`: the key holds a lone surrogate. */
export const NOT_WELL_FORMED = -2;

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
   * Encodes `key`; returns its byte length, TOO_LONG when it is longer than `maxKeyBytes`, or
   * NOT_WELL_FORMED for a lone surrogate (UTF-8 would store it as U+FFFD, merging it with other
   * keys). After a successful call, the first `keyWords(length)` words of `words` hold the key,
   * zero-padded.
   */
  encode(key: string): number {
    const n = key.length;
    if (n > this.#maxKeyBytes) return TOO_LONG; // UTF-8 never has fewer bytes than UTF-16 units
    // ASCII (most keys: IPs, ids, tenant names): one byte per unit, packed four to a word in
    // memory order, as the byte view would hold them; nothing to check, nothing to clear.
    const words = this.words;
    const littleEndian = LITTLE_ENDIAN;
    let word = 0;
    let i = 0;
    for (; i < n; i++) {
      const c = key.charCodeAt(i);
      if (c >= 0x80) break;
      const at = i & 3;
      word |= c << ((littleEndian ? at : 3 - at) << 3);
      if (at === 3) {
        words[i >> 2] = word;
        word = 0;
      }
    }
    if (i === n) {
      if ((n & 3) !== 0) words[n >> 2] = word;
      return n;
    }
    if (!isWellFormed(key)) return NOT_WELL_FORMED;
    this.words.fill(0);
    const { read, written } = encoder.encodeInto(key, this.#bytes.subarray(0, this.#maxKeyBytes + 1));
    if (read !== key.length || written > this.#maxKeyBytes) return TOO_LONG;
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
