import { clockBuffer, clockKind, resolveClock, type Clock } from '../time/clock.js';
import { checkCost, describe } from '../config/check.js';
import { checkNames } from '../config/option-names.js';
import { H_CLAIM_TIMEOUT_MS, H_CLOCK_KIND, H_ON_FULL, H_OWNER_SEQ, H_REUSE_AFTER_MS, type TableClass } from './layout.js';
import { lockAges, type LockAges } from './slot-lock.js';
import { DEFAULT_CACHE_SIZE, SlotIndex } from './slot-index.js';
import type { SlotRef } from './slot-ref.js';
import { SlotTable, type SlotState } from './table.js';
import { allocateKeyHeap, checkKeyHeap, keyHeapBytes } from './key-heap.js';
import { allocateTable, checkTableBuffer, hasKeyHeap, slotCountOf, stateOffsetOf, tailWordsOf, type TableSpec } from './table-buffer.js';
import { checkAttachOptions, type TableAttachOptions, type TableOptions } from './table-options.js';

/**
 * What every limiter class does with its shared table, written once: check its options object,
 * allocate the table, check an `attach`'s handle and options, open the table on this thread
 * (its clock, `onFull`, an owner id for lock tokens, the per-thread key cache), look keys up,
 * sweep, report, and hand out the handle. Each class adds only its own state and decisions.
 *
 * Thread-safety: a `TableSite` belongs to the thread that opened it (its key cache is
 * per-thread); the table it opens is shared, and every method is safe against other threads'
 * sites on the same table.
 */

/**
 * The handle of every class: its kind, the table, the key heap if the table has one (long keys'
 * tails), and the clock's buffer if the clock travels.
 */
export interface TableHandle {
  readonly kind: string;
  readonly table: SharedArrayBuffer;
  readonly keys: SharedArrayBuffer | null;
  readonly clock: SharedArrayBuffer | null;
}

/**
 * What a class's `attach` hands its own constructor: checked by `attachRequest`, and not
 * exported from the package, so users cannot forge one (a constructor that receives one knows
 * it came from `attach`). The constructor overload that takes it is `@internal`: stripped from
 * the published types.
 */
export class AttachRequest<Handle extends TableHandle> {
  constructor(
    readonly handle: Handle,
    readonly clock: Clock | undefined,
    readonly cacheSize: number | undefined,
    options: Readonly<Record<string, unknown>> = {},
  ) {
    this.#options = options;
  }

  /** A private field, so that a constructor's options type (a union with this class) does not gain it. */
  readonly #options: Readonly<Record<string, unknown>>;

  /** An attach option the class checks itself (`classNames` of attachRequest), as given. */
  option(name: string): unknown {
    return this.#options[name];
  }
}

/**
 * Checks `attach(handle, options)` for a table of `tableClass`; throws `TypeError` naming what is
 * wrong. A handle whose `kind` was lost on the way (copied field by field) is accepted: the
 * table's header says which class made it, and opening it checks that.
 */
export function attachRequest<Handle extends TableHandle>(
  handle: Handle, options: TableAttachOptions | undefined, tableClass: TableClass, fields = 'table, clock', classNames: readonly string[] = ['onDecision'],
): AttachRequest<Handle> {
  if (handle === null || typeof handle !== 'object' || !(handle.table instanceof SharedArrayBuffer)) {
    throw new TypeError(`handle must be a ${tableClass} handle ({ kind, ${fields} }), got ${describe(handle)}`);
  }
  if (handle.kind !== undefined && handle.kind !== `sluice.${tableClass}`) {
    throw new TypeError(`handle is a ${describe(handle.kind)} handle, not a ${tableClass}'s: attach it with that class`);
  }
  const checked = checkAttachOptions(options, classNames);
  return new AttachRequest(handle, checked.clock, checked.cacheSize, checked);
}

/**
 * Checks that a constructor's `options` is an object of known names; `example` shows its shape
 * in the error (e.g. `'{ limit, maxKeys }'`).
 */
export function checkOptionsObject(options: unknown, names: readonly string[], tableClass: TableClass, example: string): void {
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`options must be an object like ${example}, got ${describe(options)}`);
  }
  checkNames(options, names, 'options', `${tableClass} option`);
}

/**
 * Allocates a table for options already checked, and writes the header words every class reads
 * back on attach (onFull, the clock's kind). Call it only after every check has passed: nothing
 * is allocated for options that throw. The buffer is not shared yet, so plain writes fill it.
 */
export function createTable(t: TableOptions, spec: Pick<TableSpec, 'stateWords' | 'globalWords' | 'align8' | 'tableClass'>): SharedArrayBuffer {
  const buffer = allocateTable({
    maxKeys: t.maxKeys, maxKeyBytes: t.maxKeyBytes, hashSeed: t.hashSeed, forcedHash: t.forcedHash,
    claimTimeoutMs: t.claimTimeoutMs, reuseAfterMs: t.reuseAfterMs, slotsPerKey: t.slotsPerKey, layout: t.layout, ...spec,
  });
  const w = new Int32Array(buffer);
  w[H_ON_FULL] = t.onFull === 'allow' ? 1 : 0;
  w[H_CLOCK_KIND] = clockKind(t.clock);
  return buffer;
}

/** Throws `TypeError`/`RangeError` for a bad key or cost, naming it. */
export function checkRequest(key: unknown, cost: unknown): void {
  if (typeof key !== 'string' || key.length === 0) {
    throw new TypeError(`key must be a non-empty string, got ${describe(key)}`);
  }
  checkCost(cost);
}

/** One thread's view of a limiter's table. Made in two steps: `new TableSite(...)`, then `open`. */
export class TableSite {
  /** The whole buffer as int32 words (header, slots, global area). */
  readonly words: Int32Array;
  /** The key heap (long keys' tails), or null when every key fits its slot. */
  readonly keys: SharedArrayBuffer | null;
  readonly clock: Clock;
  /** The clock's shared memory when the clock travels with the handle, else null. */
  readonly clockBuffer: SharedArrayBuffer | null;
  /** onFull 'allow': a key that finds no slot passes untracked. */
  readonly allowWhenFull: boolean;
  /** Offset of a slot's state words from its base. */
  readonly stateOffset: number;
  /** How long a dead holder's key lock (or an unfinished insert) blocks others. */
  readonly claimTimeoutMs: number;
  /** When decisions and reclaims take a key's lock over (claimTimeoutMs, and the table's reuseAfterMs). */
  readonly lockAges: LockAges;
  table!: SlotTable;
  index!: SlotIndex;

  /**
   * Checks that `buffer` holds a table made by `tableClass` and resolves the clock: `clock` from
   * `attach`'s options if given, else the one the header names (see `resolveClock`). `keys` is
   * the handle's key heap, or 'new' for a table this thread just made (it gets one if it needs it).
   */
  constructor(
    buffer: SharedArrayBuffer, tableClass: TableClass, clock: Clock | undefined, clockBuffer: SharedArrayBuffer | null,
    keys: SharedArrayBuffer | null | 'new',
  ) {
    const w = checkTableBuffer(buffer, tableClass);
    this.words = w;
    // A table made with long keys has a heap that travels in the handle; a new table gets its own.
    if (!hasKeyHeap(w)) this.keys = null;
    else if (keys === 'new') this.keys = allocateKeyHeap(keyHeapBytes(slotCountOf(w), tailWordsOf(w)));
    else this.keys = checkKeyHeap(keys, 'handle.keys');
    this.clock = resolveClock(w[H_CLOCK_KIND], clock, clockBuffer, tableClass);
    this.clockBuffer = clockBuffer;
    this.allowWhenFull = w[H_ON_FULL] === 1;
    this.stateOffset = stateOffsetOf(w);
    this.claimTimeoutMs = w[H_CLAIM_TIMEOUT_MS] as number;
    this.lockAges = lockAges(this.claimTimeoutMs, w[H_REUSE_AFTER_MS] as number);
  }

  /** The site of a table this thread just made with `clock` (its buffer travels with the handle). */
  static created(buffer: SharedArrayBuffer, tableClass: TableClass, clock: Clock): TableSite {
    return new TableSite(buffer, tableClass, clock, clockBuffer(clock), 'new');
  }

  /** The site an `attach` opens. */
  static attached(request: AttachRequest<TableHandle>, tableClass: TableClass): TableSite {
    return new TableSite(request.handle.table, tableClass, request.clock, request.handle.clock, request.handle.keys ?? null);
  }

  /** A new owner id for this instance's lock tokens. */
  newOwner(): number {
    // Atomics.add: every instance on the table gets its own id, whichever thread asks.
    return Atomics.add(this.words, H_OWNER_SEQ, 1);
  }

  /** Opens the table with the class's slot hooks, and this thread's key cache. */
  open(hooks: SlotState, cacheSize: number | undefined): void {
    this.table = this.newTable(hooks);
    this.index = new SlotIndex(this.table, cacheSize ?? DEFAULT_CACHE_SIZE);
  }

  /** This thread's view of the table with the class's slot hooks (and its key heap). */
  newTable(hooks: SlotState): SlotTable {
    return new SlotTable(this.words.buffer as SharedArrayBuffer, hooks, this.keys);
  }

  /** The key's slot: cached, else found or inserted; undefined when the table has no room. */
  find(key: string): SlotRef | undefined {
    return this.index.cached(key) ?? this.index.locate(key);
  }

  /** The key's slot if the table holds one (cached, else found): never inserts. */
  peek(key: string): SlotRef | undefined {
    return this.index.peek(key);
  }

  /** The key's slot after it moved (reclaimed, reused): the cached one is dropped first. */
  findAgain(key: string): SlotRef | undefined {
    this.index.forget(key);
    return this.index.locate(key);
  }

  /** As `findAgain`, without inserting: the key's slot after it moved, if the table holds one. */
  peekAgain(key: string): SlotRef | undefined {
    this.index.forget(key);
    return this.index.peek(key);
  }

  /** A reference to `ref`'s location that outlives the next lookup (SlotIndex.lasting): for a lease. */
  lasting(ref: SlotRef): SlotRef {
    return this.index.lasting(ref);
  }

  /**
   * Reclaims the slots of idle keys; returns how many. The key cache stays: the keys a sweep keeps
   * are the ones in use, and an entry of a key it reclaimed is found stale at its next use by its
   * ctrl word, as the entries of every other thread are. (Measured, a 25,000-key working set swept
   * every 250,000 checks: clearing cost each sweep 25,000 lookups and new cache entries, and made
   * the working set's checks 1.2x-1.4x slower.)
   */
  sweep(): number {
    return this.table.sweep();
  }

  /** The table's gauges from its counters (O(1)): live keys, tombstones, mean hit probe. */
  gauges(): ReturnType<SlotTable['gauges']> {
    return this.table.gauges();
  }

  /** The table's counts (O(capacity), a snapshot) with this instance's lost races. */
  report(casRetries: number): ReturnType<SlotTable['report']> {
    return this.table.report(casRetries);
  }

  /** The structured-cloneable handle of kind `kind`. */
  handle<Kind extends string>(kind: Kind): { kind: Kind; table: SharedArrayBuffer; keys: SharedArrayBuffer | null; clock: SharedArrayBuffer | null } {
    return { kind, table: this.words.buffer as SharedArrayBuffer, keys: this.keys, clock: this.clockBuffer };
  }
}
