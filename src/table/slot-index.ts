import { checkWellFormed, describe } from '../errors.js';
import { TABLE_FULL, type SlotTable } from './table.js';

/** Entries in a thread's key cache unless configured otherwise. */
export const DEFAULT_CACHE_SIZE = 65_536;

/**
 * Where a key lives: its slot's first word and the ctrl word it had when found. A LIVE ctrl word
 * carries the slot's generation, so an unchanged ctrl means the same key still lives there.
 */
export class SlotRef {
  constructor(readonly base: number, readonly ctrl: number) {}
}


/**
 * Finds keys in a `SlotTable` through a per-thread cache: a `Map` from key to `SlotRef`, which
 * reuses the engine's cached string hash, so a hot key is never hashed in JavaScript. Callers
 * validate a cached entry against the slot's ctrl word and call `forget` when it is stale.
 *
 * Thread-safety: one instance per thread (the cache and the table's scratch are per-thread).
 */
export class SlotIndex {
  readonly #table: SlotTable;
  readonly #cache = new Map<string, SlotRef>();
  readonly #cacheSize: number;

  constructor(table: SlotTable, cacheSize: number) {
    this.#table = table;
    this.#cacheSize = cacheSize;
  }

  /** The cached location of `key`, if any. */
  cached(key: string): SlotRef | undefined {
    return this.#cache.get(key);
  }

  /**
   * Finds or inserts `key`; caches and returns its location, or undefined when its stripe is full.
   * Throws, before touching the table, `TypeError` for a key with a lone surrogate (UTF-8 would
   * store it as U+FFFD, merging it with other keys) and `RangeError` for a key longer than the
   * table's `maxKeyBytes`. Only cache misses come here: a cached key was checked when cached.
   */
  locate(key: string): SlotRef | undefined {
    checkWellFormed('key', key);
    const table = this.#table;
    const bytes = table.encoder.encode(key);
    if (bytes < 0) {
      throw new RangeError(`key must be at most ${table.maxKeyBytes} UTF-8 bytes (option maxKeyBytes), got ${describe(key)}`);
    }
    const slot = table.locate(bytes, table.hashEncoded(bytes));
    if (slot === TABLE_FULL) return undefined;
    const entry = new SlotRef(table.base(slot), table.foundCtrl);
    if (this.#cacheSize > 0) {
      if (this.#cache.size >= this.#cacheSize) this.#cache.clear();
      this.#cache.set(key, entry);
    }
    return entry;
  }

  /** Drops a stale entry. */
  forget(key: string): void {
    this.#cache.delete(key);
  }

  /** Drops every entry (after a sweep, most would be stale). */
  clear(): void {
    this.#cache.clear();
  }
}
