import { lock, unlock, type LockAges } from '../table/slot-lock.js';

/**
 * Policy rules in shared memory, so that every thread sees a replacement at once.
 *
 * ```
 * Int32 words: [version, writer lock, byte length of half 0, byte length of half 1,
 *               checksum of half 0, checksum of half 1]
 * then two halves of `maxBytes` each holding the rules as UTF-8 JSON
 * ```
 * The rules of version v live in half v & 1. A writer (under the writer lock) fills the other
 * half, stores its length and checksum, then publishes by a compareExchange of the version to
 * v + 1. A reader loads the version, the half's length and checksum, copies the half, then loads
 * the version again: unchanged means no writer of version v + 2 refilled the half meanwhile. The
 * copy must also match its checksum, which catches what the version cannot: a writer whose lock
 * was taken over (it stalled past `stealAfterMs`) goes on writing its bytes, length and checksum
 * into the half it chose, which the writer that took over has filled and published under v + 1
 * (found: a mix of two rule texts, a limit's digits from each, parsed and was used). Such a half
 * reads as torn (`json: null`) until the stalled writer has written all of it; it then holds that
 * writer's whole text, which that writer publishes again as v + 2 once its compareExchange fails.
 * A reader given a torn half keeps the rules it had.
 *
 * Thread-safety: `read` and `write` may run on any thread at the same time as each other.
 */
const V_VERSION = 0;
const V_LOCK = 1;
const V_LENGTH = 2;
const V_SUM = 4;
const HEADER_BYTES = 24;

/** FNV-1a over `bytes`, then a final mix: a torn copy matches its half's checksum by chance only (2^-32). */
function checksum(bytes: Uint8Array): number {
  let h = 0x811c9dc5 ^ bytes.length;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ (bytes[i] as number), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) | 0;
}

/** Allocates a store holding `json` (at most `maxBytes` UTF-8 bytes) as version 0. */
export function createRulesStore(json: string, maxBytes: number): SharedArrayBuffer {
  const bytes = new TextEncoder().encode(json);
  if (bytes.length > maxBytes) throw new RangeError(`rules take ${bytes.length} bytes as JSON, over options.maxRulesBytes (${maxBytes})`);
  const buffer = new SharedArrayBuffer(HEADER_BYTES + 2 * maxBytes);
  new Uint8Array(buffer, HEADER_BYTES, maxBytes).set(bytes);
  const w = new Int32Array(buffer);
  // Not shared yet: plain writes.
  w[V_LENGTH] = bytes.length;
  w[V_SUM] = checksum(bytes);
  return buffer;
}

/** Bytes each half can hold. */
export function storeCapacity(buffer: SharedArrayBuffer): number {
  return (buffer.byteLength - HEADER_BYTES) / 2;
}

/** The current version number (cheap: one load). */
export function storeVersion(buffer: Int32Array): number {
  // Atomics.load (acquire): pairs with the writer's publishing store of the version.
  return Atomics.load(buffer, V_VERSION);
}

/**
 * What identifies the text in version `version`'s half: its length and checksum words, folded.
 * A writer still at a torn half stores both when it is done, so a reader that found the half
 * torn reads it again once this changes (two loads, not a copy).
 */
export function halfStamp(words: Int32Array, version: number): number {
  const half = version & 1;
  // Atomics.load of each: they are written by Atomics.store (writeRules).
  return Math.imul(Atomics.load(words, V_LENGTH + half), 0x9e3779b1) ^ Atomics.load(words, V_SUM + half);
}

/**
 * Reads the current rules JSON and its version; `json` is null when the half is torn (see above:
 * the caller keeps the rules it had, and may wait for `halfStamp` to change).
 */
export function readRules(words: Int32Array): { json: string | null; version: number } {
  const buffer = words.buffer as SharedArrayBuffer;
  const capacity = storeCapacity(buffer);
  for (;;) {
    const version = Atomics.load(words, V_VERSION);
    const half = version & 1;
    // Atomics.load of length and checksum after the version: the writer stored both before its
    // publishing compareExchange, so they are at least that writer's.
    const length = Math.min(Math.max(Atomics.load(words, V_LENGTH + half), 0), capacity);
    const sum = Atomics.load(words, V_SUM + half);
    // TextDecoder refuses shared memory: copy the half out first.
    const copy = new Uint8Array(length);
    copy.set(new Uint8Array(buffer, HEADER_BYTES + half * capacity, length));
    // Version unchanged after the copy: no writer of version + 2 started refilling this half
    // meanwhile. The checksum catches the rest: a copy torn by any writer still at it.
    if (Atomics.load(words, V_VERSION) === version) return { json: checksum(copy) === sum ? new TextDecoder().decode(copy) : null, version };
  }
}

/** Publishes new rules JSON (already validated by the caller); returns the new version. */
export function writeRules(words: Int32Array, json: string, owner: number, ages: LockAges): number {
  const buffer = words.buffer as SharedArrayBuffer;
  const capacity = storeCapacity(buffer);
  const bytes = new TextEncoder().encode(json);
  if (bytes.length > capacity) throw new RangeError(`rules take ${bytes.length} bytes as JSON, over options.maxRulesBytes (${capacity})`);
  const sum = checksum(bytes);
  for (;;) {
    const token = lock(words, V_LOCK, owner, ages);
    const version = Atomics.load(words, V_VERSION);
    const half = (version + 1) & 1;
    new Uint8Array(buffer, HEADER_BYTES + half * capacity, bytes.length).set(bytes);
    // Atomics.store of length, then checksum, after the bytes: a reader that loads them after
    // our publishing compareExchange sees these bytes with them.
    Atomics.store(words, V_LENGTH + half, bytes.length);
    Atomics.store(words, V_SUM + half, sum);
    // compareExchange publishes (release): readers that see version + 1 see the bytes above. It
    // fails only if our writer lock was taken over and another writer published meanwhile.
    const published = Atomics.compareExchange(words, V_VERSION, version, version + 1) === version;
    unlock(words, V_LOCK, token);
    if (published) return version + 1;
  }
}
