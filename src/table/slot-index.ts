import { checkWellFormed, describe } from '../config/check.js';
import { NOT_WELL_FORMED } from './hash.js';
import { fillRecord, RECORD_WORDS, SlotRef } from './slot-ref.js';
import { TABLE_FULL, type SlotTable } from './table.js';

/**
 * What every decision path returns when the slot it was given no longer holds the key (reclaimed,
 * or reused by another key): the caller looks the key up again. One value for every engine.
 */
export const RELOCATE = 2;

/** Entries in a thread's key cache unless configured otherwise. */
export const DEFAULT_CACHE_SIZE = 65_536;

/**
 * Lookups in one judgement of the cache while it runs: at least this, and at least twice its
 * size (a cold cache has that long to fill before its hit rate counts).
 */
const MIN_WINDOW = 16_384;
/**
 * Two windows in a row with more misses than this share of their lookups turn the cache off. A
 * hit saves the table's lookup (its key encoding, hash and probe); a miss adds a failed
 * `Map.get`, a new entry and a `Map.set` to it. And the hits of a cache that misses often are
 * costly themselves: their keys come from a set larger than the cache, drawn in no order, so
 * the Map's memory and the entry are cold. Measured, same process, 65,536 entries against no
 * cache: 100,000 keys drawn evenly (two thirds of the lookups hit) 1.4x-1.9x slower; Zipf over
 * 200,000 keys 1.3x-1.5x slower; 25,000 keys of 24 bytes in turn (every lookup a hit) 0.6x-0.7x.
 * Two windows, so that a cold start (every key a miss once) does not.
 */
const MAX_MISS_SHARE = 0.25;
/** Windows without the cache before it is tried again (the keys a thread sees may change). */
const OFF_WINDOWS = 32;
/**
 * Keys a cache that has not yet proven itself keeps per window among those its own lookups
 * inserted (the rest it keeps at their next lookup, once the table holds them): enough for a small
 * key set to be cached from its first check, too few for a stream of new keys to cost much.
 */
const NEW_PER_WINDOW = 1_024;
/**
 * Bits of the doorkeeper (see #admit) per lookup of a window: a window sets at most one per lookup
 * (one that found its key in the table), so at most an eighth of them, and a key seen once is
 * rarely taken for one seen twice. 128 KiB for the default 65,536 entries (a window of 131,072).
 */
const DOOR_BITS_PER_LOOKUP = 8;
/**
 * Lookups in one proof of an unproven cache: every PROOF_SPAN lookups of a window, a cache with
 * at most MAX_MISS_SHARE misses among them has proven itself, without waiting for its window's
 * end (a working set is cached a few thousand lookups after it is first seen twice; a window is
 * at least 16,384).
 */
const PROOF_SPAN = 4_096;
/**
 * While an unproven cache bypasses its Map (a proof span in which every lookup missed: likely a
 * stream of new keys), it consults the Map on one lookup in SAMPLE_EVERY; a hit ends the bypass.
 * A Map.get that misses with a string never hashed before (a server's keys are new strings each
 * time) cost 300-670 ns on Node 26.12, against 40-70 ns on Node 20 to 24 (200,000 lookups in a
 * Map of 1,024 entries); hits cost the same on all of them.
 */
const SAMPLE_EVERY = 64;
/** Records a new index starts with (it grows by doubling to its cacheSize + 1). */
const INITIAL_RECORDS = 1_024;

/**
 * Finds keys in a `SlotTable` through a per-thread cache: a `Map` from key to the number of a
 * record (slot-ref.ts), which reuses the engine's cached string hash, so a hot key is never hashed
 * in JavaScript. Callers validate a cached entry against the slot's ctrl word and call `forget`
 * when it is stale.
 *
 * The cache pays only while enough lookups hit it: a miss costs a failed `Map.get`, a new entry
 * and a `Map.set` on top of the table's own lookup (far more keys than the cache holds, drawn
 * evenly, hit it rarely). So it judges itself over windows of lookups: two windows in a row with more
 * than 25% misses turn it off (`cached` then answers at once and `locate` keeps nothing), and
 * after OFF_WINDOWS windows it is tried again, from empty. Until a window has gone well, it keeps
 * few of the keys its lookups insert (NEW_PER_WINDOW); after, only keys a window's lookups found
 * in the table twice (#admit). So a stream of new keys costs little, and leaves the keys that come
 * back their entries.
 *
 * Thread-safety: one instance per thread (the cache and the table's scratch are per-thread).
 */
export class SlotIndex {
  readonly #table: SlotTable;
  /** Key to the number of its record in #records (a small integer: no object per entry). */
  readonly #cache = new Map<string, number>();
  /**
   * The records (slot-ref.ts), RECORD_WORDS words each: number 0 is the scratch record, where a
   * lookup that keeps nothing (the cache off, or a new key it does not keep) writes; numbers from 1
   * are cache entries, handed out in turn (#next) and all taken back when the cache is emptied.
   * Grows by doubling up to cacheSize + 1 records.
   */
  #records: Int32Array;
  /** The next record a cache entry takes. */
  #next = 1;
  /**
   * What every lookup returns: one reference, moved to the record of each key found (SlotRef.point).
   * It is valid until this index's next lookup: whoever keeps a reference longer (a reservation,
   * a lease) keeps `lasting(ref)`.
   */
  readonly #view = new SlotRef(0, 0);
  readonly #cacheSize: number;
  /** Lookups in a window: twice the cache, at least MIN_WINDOW. */
  readonly #window: number;
  /** Whether the cache runs (false with cacheSize 0, and while judged not worth it). */
  #on: boolean;
  /** Lookups left in this window, and misses so far in it (cache on), or windows left off. */
  #left: number;
  /**
   * The value of #left at which `cached` next stops to judge: 0 (the window's end), or while the
   * cache is not #proven, the end of the current proof span. One test on the hot path either way.
   */
  #stop: number;
  #misses = 0;
  #offLeft = 0;
  /** The last window had too many misses: one more like it turns the cache off. */
  #missedLast = false;
  /**
   * Whether the cache has earned its keep: a window, or a proof span of one (PROOF_SPAN), had few
   * misses since the cache last started. Until then it keeps few of the keys it inserts (see
   * #remember). Kept until the cache turns off: one bad window (the one after a full cache is
   * emptied) does not take it away.
   */
  #proven = false;
  /** Inserted keys this window may still keep while not #proven. */
  #newLeft = NEW_PER_WINDOW;
  /**
   * The doorkeeper: a bit per hashed slot number, set by the first lookup of a window that found a
   * key there without the cache; the second keeps the key (#admit). Made at its first use, cleared
   * at each window's end.
   */
  #door: Int32Array | null = null;
  /** #misses at the start of the current proof span. */
  #spanMisses = 0;
  /** Whether `cached` consults the Map on every lookup: on, and not bypassing it (SAMPLE_EVERY). */
  #direct: boolean;
  /** Lookups until the next sampled one while bypassing. */
  #sampleLeft = SAMPLE_EVERY;

  constructor(table: SlotTable, cacheSize: number) {
    this.#table = table;
    this.#cacheSize = cacheSize;
    this.#on = cacheSize > 0;
    this.#direct = this.#on;
    this.#window = Math.max(MIN_WINDOW, 2 * cacheSize);
    this.#left = this.#window;
    this.#stop = this.#window - PROOF_SPAN;
    this.#records = new Int32Array(Math.min(cacheSize + 1, INITIAL_RECORDS) * RECORD_WORDS);
    this.#view.over(this.#records);
  }

  /** The cached location of `key`, if any. */
  cached(key: string): SlotRef | undefined {
    if (--this.#left === this.#stop) {
      if (this.#left === 0) this.#judge();
      else this.#prove();
    }
    // One test on the common path. (Not the Map's size, to spare a Map.get on an empty cache:
    // reading `size` cost churn traffic 7% in a same-process A/B.)
    if (this.#direct) {
      const record = this.#cache.get(key);
      return record === undefined ? undefined : this.#view.point(record);
    }
    return this.#on ? this.#sample(key) : undefined;
  }

  /** A lookup while bypassing the Map: one in SAMPLE_EVERY consults it, and a hit ends the bypass. */
  #sample(key: string): SlotRef | undefined {
    if (--this.#sampleLeft !== 0) return undefined;
    this.#sampleLeft = SAMPLE_EVERY;
    const record = this.#cache.get(key);
    if (record === undefined) return undefined;
    this.#direct = true;
    return this.#view.point(record);
  }

  /** Whether this index's latest `locate` inserted the key it returned (this thread's insert was published). */
  get insertedLast(): boolean {
    return this.#table.foundNew;
  }

  /** Whether the cache runs now (for stats and tests). */
  get caching(): boolean {
    return this.#on;
  }

  /**
   * Finds or inserts `key`; caches and returns its location, or undefined when its stripe is full.
   * Throws, before touching the table, `TypeError` for a key with a lone surrogate (UTF-8 would
   * store it as U+FFFD, merging it with other keys) and `RangeError` for a key longer than the
   * table's `maxKeyBytes`. Only cache misses come here: a cached key was checked when cached.
   */
  locate(key: string): SlotRef | undefined {
    const table = this.#table;
    const bytes = this.#encode(key);
    const slot = table.locate(bytes, table.hashEncoded());
    if (slot === TABLE_FULL) return undefined;
    if (this.#on) this.#misses++;
    return this.#remember(key, slot);
  }

  /** Encodes `key` into the table's encoder; returns its byte length, or throws as `locate` says. */
  #encode(key: string): number {
    const table = this.#table;
    const bytes = table.encoder.encode(key);
    if (bytes === NOT_WELL_FORMED) checkWellFormed('key', key);
    if (bytes < 0) {
      throw new RangeError(`key must be at most ${table.maxKeyBytes} UTF-8 bytes (option maxKeyBytes), got ${describe(key)}`);
    }
    return bytes;
  }

  /**
   * The location of `key` at `slot` (just found, with `foundCtrl` and `foundNew`): a new cache
   * entry while the cache runs and keeps the key, else the scratch record; the view moved to it.
   * Until the cache has proven itself (#proven), it keeps every key found, and a key the lookup
   * itself inserted only among the window's first NEW_PER_WINDOW such keys: past those, a first
   * check of a new key is likely one of a stream that would fill the cache with keys seen once.
   * Once proven, it keeps only keys the doorkeeper admits (#admit).
   */
  #remember(key: string, slot: number): SlotRef {
    const table = this.#table;
    const base = table.base(slot);
    const ctrl = table.foundCtrl;
    const keep = this.#on && (this.#proven ? !table.foundNew && this.#admit(slot) : !table.foundNew || this.#newLeft-- > 0);
    if (!keep) {
      fillRecord(this.#records, 0, base, ctrl);
      return this.#view.point(0);
    }
    // Every entry takes a record of its own (a forgotten key's is not reused): past cacheSize
    // records, the cache starts again from empty, as it did when full.
    if (this.#next > this.#cacheSize) this.#empty();
    const record = this.#next++;
    if (record * RECORD_WORDS === this.#records.length) this.#grow();
    fillRecord(this.#records, record * RECORD_WORDS, base, ctrl);
    this.#cache.set(key, record);
    return this.#view.point(record);
  }

  /**
   * Whether a proven cache keeps a key found in the table at `slot` without it: at the second such
   * lookup in a window (the doorkeeper of TinyLFU, by slot number; DOOR_BITS_PER_LOOKUP). A key
   * this thread's own lookup inserted it never keeps (the caller asks only for keys found). So a
   * stream of keys each checked once or twice, a server's new clients, leaves the cache to the keys
   * that come back: keeping them emptied a full cache every few thousand new keys, and the working
   * set lost its entries each time (docs/design.md, section 8). A slot reused by another key since
   * its bit was set lets that key in one lookup early; nothing else changes.
   */
  #admit(slot: number): boolean {
    const door = this.#door ?? this.#newDoor();
    const h = Math.imul(slot + 1, 0x9e3779b1) >>> 0;
    const at = h % door.length;
    const bit = 1 << (h >>> 27);
    const word = door[at] as number;
    if ((word & bit) !== 0) return true;
    door[at] = word | bit;
    return false;
  }

  #newDoor(): Int32Array {
    const door = new Int32Array((DOOR_BITS_PER_LOOKUP * this.#window) >>> 5);
    this.#door = door;
    return door;
  }

  /** Drops every entry and takes their records back. */
  #empty(): void {
    this.#cache.clear();
    this.#next = 1;
  }

  /** Doubles the records, up to cacheSize + 1 of them; the view follows. */
  #grow(): void {
    const old = this.#records;
    const records = new Int32Array(Math.min(2 * old.length, (this.#cacheSize + 1) * RECORD_WORDS));
    records.set(old);
    this.#records = records;
    this.#view.over(records);
  }

  /**
   * A reference to `ref`'s location that outlives this index's next lookup: a copy of the view's
   * location with a record of its own (nothing of what this thread knew of the key: a decision
   * through it loads what it needs), or `ref` itself when it is already such a copy.
   */
  lasting(ref: SlotRef): SlotRef {
    return ref === this.#view ? new SlotRef(ref.base, ref.ctrl) : ref;
  }

  /**
   * Tells the key's cache entry, if it has one at `ref`'s location, that this thread wrote
   * `ref.tat` there through `ref` (a copy from `lasting`: a reservation's refund), as a write
   * through the entry itself would have. Moves the view.
   */
  wrote(key: string, ref: SlotRef): void {
    const record = this.#cache.get(key);
    if (record === undefined) return;
    const entry = this.#view.point(record);
    if (entry.base === ref.base && entry.ctrl === ref.ctrl) entry.tat = ref.tat;
  }

  /**
   * Finds `key` without inserting it: its location (cached), or undefined when the table holds
   * no slot for it. Throws as `locate` does for a key the table could never hold.
   */
  peek(key: string): SlotRef | undefined {
    const cached = this.cached(key);
    if (cached !== undefined) return cached;
    const table = this.#table;
    const bytes = this.#encode(key);
    const slot = table.find(bytes, table.hashEncoded());
    return slot < 0 ? undefined : this.#remember(key, slot);
  }

  /** Drops a stale entry. */
  forget(key: string): void {
    this.#cache.delete(key);
  }

  /** The end of a proof span inside a window: proven if few of its lookups missed (PROOF_SPAN). */
  #prove(): void {
    const missed = this.#misses - this.#spanMisses;
    if (this.#on && missed <= PROOF_SPAN * MAX_MISS_SHARE) this.#proven = true;
    // Not one hit in the span, unproven: bypass the Map (SAMPLE_EVERY) until a sampled lookup hits.
    // (The span's last lookup is judged here before its miss is counted, by the locate after it.)
    if (this.#on && !this.#proven && missed >= PROOF_SPAN - 1) this.#direct = false;
    this.#spanMisses = this.#misses;
    this.#stop = this.#proven ? 0 : Math.max(0, this.#left - PROOF_SPAN);
  }

  /** The end of a window: turns the cache off after too many misses, or on after OFF_WINDOWS. */
  #judge(): void {
    this.#left = this.#window;
    this.#newLeft = NEW_PER_WINDOW;
    this.#door?.fill(0);
    if (this.#on) {
      const missed = this.#misses > this.#window * MAX_MISS_SHARE;
      if (missed && this.#missedLast) {
        this.#on = false;
        this.#offLeft = OFF_WINDOWS;
        this.#empty();
      }
      this.#missedLast = missed && this.#on;
      if (!missed) this.#proven = true;
      if (this.#proven || !this.#on) this.#direct = this.#on;
    } else if (this.#cacheSize > 0 && --this.#offLeft === 0) {
      this.#on = true;
      this.#direct = true;
      this.#proven = false;
    }
    this.#misses = 0;
    this.#spanMisses = 0;
    this.#stop = this.#proven ? 0 : this.#window - PROOF_SPAN;
  }
}
