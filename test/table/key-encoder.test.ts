// KeyEncoder packs ASCII keys straight into words and sends every other key through TextEncoder:
// both must store exactly the key's UTF-8 bytes, zero-padded, so that a key always meets itself.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hashWords, KeyEncoder, keyWords, NOT_WELL_FORMED, TOO_LONG } from '../../src/table/hash.js';

function utf8Words(key: string): Int32Array {
  const bytes = new TextEncoder().encode(key);
  const padded = new Uint8Array(keyWords(bytes.length) * 4);
  padded.set(bytes);
  return new Int32Array(padded.buffer);
}

describe('KeyEncoder', () => {
  it('stores every well-formed key as its UTF-8 bytes, zero-padded, whatever came before it', () => {
    const encoder = new KeyEncoder(64);
    fc.assert(fc.property(fc.array(fc.oneof(fc.string({ maxLength: 64 }), fc.string({ unit: 'grapheme', maxLength: 16 })), { minLength: 1, maxLength: 4 }), (keys) => {
      for (const key of keys) {
        const want = utf8Words(key);
        const bytes = encoder.encode(key);
        if (want.byteLength > 64 + 3 || new TextEncoder().encode(key).length > 64) {
          expect(bytes).toBe(TOO_LONG);
          continue;
        }
        expect(bytes).toBe(new TextEncoder().encode(key).length);
        expect(Array.from(encoder.words.subarray(0, keyWords(bytes)))).toEqual(Array.from(want));
      }
    }));
  });

  it('hashes each key as it encodes it: the hash of its words, with its seed, whatever came before it', () => {
    fc.assert(fc.property(fc.integer(), fc.array(fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 10 })), { minLength: 1, maxLength: 4 }), (seed, keys) => {
      const encoder = new KeyEncoder(40, seed);
      for (const key of keys) {
        const bytes = encoder.encode(key);
        if (bytes < 0) continue;
        expect(encoder.hash).toBe(hashWords(utf8Words(key), keyWords(bytes), seed));
      }
    }));
    // The seed is part of the hash: one key, two seeds.
    const a = new KeyEncoder(16, 1);
    const b = new KeyEncoder(16, 2);
    a.encode('10.0.0.1');
    b.encode('10.0.0.1');
    expect(a.hash).not.toBe(b.hash);
  });

  it('sends a key to the UTF-8 path wherever its first unit past ASCII stands: a whole group of four, or the last one to three', () => {
    const encoder = new KeyEncoder(24, 5);
    for (const key of ['\u00e9abc', 'abc\u00e9', 'abcd\u00e9', 'abcdefg\u00e9', 'abcdefgh\u0080', 'abcde\u20acf', 'abcdefgh\u{1F600}', 'abcd\u007f']) {
      const bytes = encoder.encode(key);
      expect(bytes).toBe(new TextEncoder().encode(key).length);
      expect(Array.from(encoder.words.subarray(0, keyWords(bytes)))).toEqual(Array.from(utf8Words(key)));
      expect(encoder.hash).toBe(hashWords(utf8Words(key), keyWords(bytes), 5));
    }
  });

  it('tells a key one byte too long, in ASCII and in UTF-8, and a lone surrogate', () => {
    const encoder = new KeyEncoder(8);
    expect(encoder.encode('12345678')).toBe(8);
    expect(encoder.encode('123456789')).toBe(TOO_LONG);
    expect(encoder.encode('1234567\u00e9')).toBe(TOO_LONG); // 9 bytes in 8 units
    expect(encoder.encode('123456\u00e9')).toBe(8);
    expect(encoder.encode('ab\uD800')).toBe(NOT_WELL_FORMED);
    expect(encoder.encode('\uDC00ab')).toBe(NOT_WELL_FORMED);
  });
});
