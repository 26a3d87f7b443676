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

/**
 * Encodes keys into reusable scratch memory, without allocating per key, and hashes them on the
 * way: an ASCII key's words are mixed into the hash as they are packed (one pass over the key,
 * not a second over its words); `hash` always equals `hashWords(words, keyWords(length), seed)`.
 */
export class KeyEncoder {
  /** The encoded key, `words` int32 words long, zero-padded. */
  readonly words: Int32Array;
  /** The hash of the last key encoded (`hashWords` with the encoder's seed); valid after a successful `encode`. */
  hash = 0;
  readonly #bytes: Uint8Array;
  readonly #maxKeyBytes: number;
  readonly #seed: number;

  constructor(maxKeyBytes: number, seed = 0) {
    this.#maxKeyBytes = maxKeyBytes;
    this.#seed = seed | 0;
    // One spare byte lets encodeInto report a key that is exactly one byte too long.
    const buffer = new ArrayBuffer(Math.ceil((maxKeyBytes + 4) / 4) * 4);
    this.#bytes = new Uint8Array(buffer);
    this.words = new Int32Array(buffer);
  }

  /**
   * Encodes `key`; returns its byte length, TOO_LONG when it is longer than `maxKeyBytes`, or
   * NOT_WELL_FORMED for a lone surrogate (UTF-8 would store it as U+FFFD, merging it with other
   * keys). After a successful call, the first `keyWords(length)` words of `words` hold the key,
   * zero-padded, and `hash` its hash.
   */
  encode(key: string): number {
    const n = key.length;
    if (n > this.#maxKeyBytes) return TOO_LONG; // UTF-8 never has fewer bytes than UTF-16 units
    // ASCII (most keys: IPs, ids, tenant names): one byte per unit, packed four to a word in
    // memory order, as the byte view would hold them; nothing to check, nothing to clear. Four
    // units at a time, each whole word into the hash at once (mixWord, as hashWords does); a
    // group with a unit past ASCII sends the key to the general path below.
    const words = this.words;
    let h = this.#seed;
    let i = 0;
    let ascii = true;
    for (; i + 4 <= n; i += 4) {
      const a = key.charCodeAt(i);
      const b = key.charCodeAt(i + 1);
      const c = key.charCodeAt(i + 2);
      const d = key.charCodeAt(i + 3);
      if ((a | b | c | d) >= 0x80) {
        ascii = false;
        break;
      }
      const word = LITTLE_ENDIAN ? a | (b << 8) | (c << 16) | (d << 24) : (a << 24) | (b << 16) | (c << 8) | d;
      words[i >> 2] = word;
      h = mixWord(h, word);
    }
    if (ascii) {
      // The last one to three units, zero-padded.
      let word = 0;
      for (let at = 0; i < n; i++, at++) {
        const c = key.charCodeAt(i);
        if (c >= 0x80) {
          ascii = false;
          break;
        }
        word |= c << ((LITTLE_ENDIAN ? at : 3 - at) << 3);
      }
      if (ascii) {
        if ((n & 3) !== 0) {
          words[n >> 2] = word;
          h = mixWord(h, word);
        }
        this.hash = finish(h, keyWords(n));
        return n;
      }
    }
    if (!isWellFormed(key)) return NOT_WELL_FORMED;
    this.words.fill(0);
    const { read, written } = encoder.encodeInto(key, this.#bytes.subarray(0, this.#maxKeyBytes + 1));
    if (read !== key.length || written > this.#maxKeyBytes) return TOO_LONG;
    this.hash = hashWords(words, keyWords(written), this.#seed);
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
  for (let i = 0; i < count; i++) h = mixWord(h, words[i] as number);
  return finish(h, count);
}

/** MurmurHash3 x86_32's step for one word `k` into the running hash `h`. */
function mixWord(h: number, k: number): number {
  k = Math.imul(k, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** MurmurHash3 x86_32's finalisation of the running hash `h` of `count` words. */
function finish(h: number, count: number): number {
  h ^= count * 4;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}
