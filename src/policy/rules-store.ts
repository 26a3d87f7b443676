import { lock, unlock } from '../table/slot-lock.js';

/**
 * Policy rules in shared memory, so that every thread sees a replacement at once.
 *
 * ```
 * Int32 words: [version, writer lock, byte length of half 0, byte length of half 1]
 * then two halves of `maxBytes` each holding the rules as UTF-8 JSON
 * ```
 * The rules of version v live in half v & 1. A writer (under the writer lock) fills the other
 * half, then publishes by storing version v + 1. A reader loads the version, copies that half,
 * then loads the version again: unchanged means no writer reused the half while it was copied.
 * A writer that dies holding the writer lock is taken over after `stealAfterMs`; a writer that is
 * alive but stalled that long in the middle of its copy could leave a torn half, which readers
 * detect (it does not parse or validate) and skip, keeping the rules they had.
 *
 * Thread-safety: `read` and `write` may run on any thread at the same time as each other.
 */
const V_VERSION = 0;
const V_LOCK = 1;
const V_LENGTH = 2;
const HEADER_BYTES = 16;

/** Allocates a store holding `json` (at most `maxBytes` UTF-8 bytes) as version 0. */
export function createRulesStore(json: string, maxBytes: number): SharedArrayBuffer {
  const bytes = new TextEncoder().encode(json);
  if (bytes.length > maxBytes) throw new RangeError(`rules take ${bytes.length} bytes as JSON, over options.maxRulesBytes (${maxBytes})`);
  const buffer = new SharedArrayBuffer(HEADER_BYTES + 2 * maxBytes);
  new Uint8Array(buffer, HEADER_BYTES, maxBytes).set(bytes);
  new Int32Array(buffer)[V_LENGTH] = bytes.length; // not shared yet: a plain write
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

/** Reads the current rules JSON and its version. */
export function readRules(words: Int32Array): { json: string; version: number } {
  const buffer = words.buffer as SharedArrayBuffer;
  const capacity = storeCapacity(buffer);
  for (;;) {
    const version = Atomics.load(words, V_VERSION);
    const half = version & 1;
    const length = Atomics.load(words, V_LENGTH + half);
    // TextDecoder refuses shared memory: copy the half out first.
    const copy = new Uint8Array(length);
    copy.set(new Uint8Array(buffer, HEADER_BYTES + half * capacity, length));
    // Version unchanged after the copy: no writer started refilling this half meanwhile
    // (a writer only refills it after publishing version + 1).
    if (Atomics.load(words, V_VERSION) === version) return { json: new TextDecoder().decode(copy), version };
  }
}

/** Publishes new rules JSON (already validated by the caller); returns the new version. */
export function writeRules(words: Int32Array, json: string, owner: number, stealAfterMs: number): number {
  const buffer = words.buffer as SharedArrayBuffer;
  const capacity = storeCapacity(buffer);
  const bytes = new TextEncoder().encode(json);
  if (bytes.length > capacity) throw new RangeError(`rules take ${bytes.length} bytes as JSON, over options.maxRulesBytes (${capacity})`);
  for (;;) {
    const token = lock(words, V_LOCK, owner, stealAfterMs);
    const version = Atomics.load(words, V_VERSION);
    const half = (version + 1) & 1;
    new Uint8Array(buffer, HEADER_BYTES + half * capacity, bytes.length).set(bytes);
    Atomics.store(words, V_LENGTH + half, bytes.length);
    // compareExchange publishes (release): readers that see version + 1 see the bytes above. It
    // fails only if our writer lock was taken over and another writer published meanwhile.
    const published = Atomics.compareExchange(words, V_VERSION, version, version + 1) === version;
    unlock(words, V_LOCK, token);
    if (published) return version + 1;
  }
}
