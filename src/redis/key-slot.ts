import { describe } from '../config/check.js';

/** A Redis Cluster has this many hash slots; a key's slot is its CRC16 modulo this. */
export const SLOTS = 16384;

/** CRC16-CCITT as XMODEM computes it (polynomial 0x1021, initial value 0), a byte at a time. */
const TABLE = new Uint16Array(256);
for (let b = 0; b < 256; b++) {
  let crc = b << 8;
  for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  TABLE[b] = crc & 0xffff;
}

function step(crc: number, byte: number): number {
  return ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ byte) & 0xff] as number);
}

/**
 * The CRC16 of the UTF-8 bytes of `key` from code unit `start` to `end` (excluded), encoding as
 * it goes so that no key allocates: ASCII code units are their own bytes. A lone surrogate is
 * encoded as U+FFFD, as `Buffer.from(key)` (and so every client) sends it.
 */
function crc16(key: string, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) {
    let c = key.charCodeAt(i);
    if (c < 0x80) {
      crc = step(crc, c);
      continue;
    }
    if (c < 0x800) {
      crc = step(step(crc, 0xc0 | (c >> 6)), 0x80 | (c & 0x3f));
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < end ? key.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        // A surrogate pair: one code point above U+FFFF, four bytes.
        const cp = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        crc = step(step(step(step(crc, 0xf0 | (cp >> 18)), 0x80 | ((cp >> 12) & 0x3f)), 0x80 | ((cp >> 6) & 0x3f)), 0x80 | (cp & 0x3f));
        i++;
        continue;
      }
      c = 0xfffd;
    }
    crc = step(step(step(crc, 0xe0 | (c >> 12)), 0x80 | ((c >> 6) & 0x3f)), 0x80 | (c & 0x3f));
  }
  return crc;
}

/**
 * The Redis Cluster slot of `key`: the CRC16 (XMODEM) of its UTF-8 bytes modulo 16384. When the
 * key holds a `{` followed later by a `}` with at least one character between the first `{` and
 * the first `}` after it, only those characters (the hash tag) are hashed, so `a{user}:0` and
 * `b{user}:1` share a slot. The braces are ASCII and never part of another character's UTF-8
 * bytes, so finding them among the string's code units finds them among its bytes. Allocates
 * nothing.
 */
export function keySlot(key: string): number {
  if (typeof key !== 'string') throw new TypeError(`key must be a string, got ${describe(key)}`);
  let start = 0;
  let end = key.length;
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  return crc16(key, start, end) & (SLOTS - 1);
}

/** `keySlot` of a key given as its bytes (for a client whose key prefix is a Buffer). */
export function keySlotOfBytes(key: Uint8Array): number {
  if (!(key instanceof Uint8Array)) throw new TypeError(`key must be a Uint8Array, got ${describe(key)}`);
  let start = 0;
  let end = key.length;
  const open = key.indexOf(0x7b);
  if (open !== -1) {
    const close = key.indexOf(0x7d, open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) crc = step(crc, key[i] as number);
  return crc & (SLOTS - 1);
}
