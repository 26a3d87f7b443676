import { createHash } from 'node:crypto';
import type { Clock } from '../time/clock.js';
import { describe, integerInRange } from '../config/check.js';
import { cas64 } from '../math/word64.js';
import { H_ALGORITHM, H_MAX_KEYS, S_CTRL } from '../table/layout.js';
import { NOT_IDLE, SlotTable } from '../table/table.js';
import { attachRequest, createTable, TableSite } from '../table/table-site.js';
import { DEFAULT_CACHE_SIZE } from '../table/slot-index.js';
import type { AttachOptions } from '../rate/types.js';
import {
  badNumber, checkFinite, parseTierOptions, type LocalTierHandle, type LocalTierOptions, type LocalTierStats,
  type RefillToken,
} from './local-tier-options.js';
import {
  DEAD_HI, FIELD_MASK, hiOf, HELD, LEASE, loadClearAt, LIMIT_MS, LOCAL_TIER_TABLE, loOf, MAX_PERMITS, NONE, REFILL,
  REFUSAL, refusalWrite, retireSlot, stampAt, stampOf, STATE_WORDS, T_ALL, T_CLEAR, T_CONFIG, T_INSERTS, T_LEASE_MS, T_REFILL_TIMEOUT_MS,
  tierSlotState, TierRef, WRITE,
} from './local-tier-slot.js';

export type { LocalTierHandle, LocalTierOptions, LocalTierStats } from './local-tier-options.js';

const CONSTRUCT = Symbol('LocalTier');

/**
 * A limiter was given a LocalTier that serves another limiter configuration (other limits, or
 * another prefix): the tier's refusals and leases are Redis's answers under the other's limits,
 * and a stricter limiter would spend a looser one's leases (found: a 2-per-hour limiter admitted
 * 40 of 40 after a 1,000-per-hour one on another prefix leased 50 permits for the same key).
 * Give each configuration its own tier.
 */
export class LocalTierConfigError extends TypeError {
  override readonly name = 'LocalTierConfigError';
  /** The configuration the limiter has, as fingerprinted. */
  readonly config: string;

  constructor(message: string, config: string) {
    super(message);
    this.config = config;
  }
}

/** A configuration's fingerprint: 64 bits of its SHA-256, never 0 (0: the tier serves none yet). */
function fingerprint(config: string): bigint {
  const f = createHash('sha256').update(config).digest().readBigInt64BE(0);
  return f === 0n ? 1n : f;
}

/** A fingerprint as text, for messages. */
function fingerprintText(f: bigint): string {
  return BigInt.asUintN(64, f).toString(16).padStart(16, '0');
}

/**
 * One shared-memory structure per process in front of Redis: created once, its `handle` posted
 * to every worker thread, `attach`ed there. Every `...Ms` argument is on the tier's clock
 * (performance.now(), which every worker shares through performance.timeOrigin).
 *
 * Refusal cache: when Redis says no request of cost 1 on a key can pass before U, every thread
 * refuses it locally until U (`refuseUntil`, `refusedFor`; `refuseAllUntil`, `allRefusedFor` for
 * the global cap). Never reported refused at or after U, however long the entry sat untouched;
 * two keys are never confused (keys are stored in full). A full table, an oversized key or one
 * with a lone surrogate is simply not cached: 0, false, never an error.
 *
 * Leases: a thread takes N permits for a key from Redis and publishes them (`offer`); every thread
 * spends them by compare-and-swap (`take`) until askedAt + leaseMs. `beginRefill`/`endRefill`
 * let one thread at a time refill a key; one that stops is taken over after refillTimeoutMs.
 * Over-admission. Redis counts a lease's permits when they are asked for; they are admitted here
 * later, so a window can admit permits counted before it began. Whichever thread stops where:
 * - every permit is admitted less than leaseMs after it was asked for (a take counts only if its
 *   reading after its compare-and-swap is before askedAt + leaseMs of the lease it spent from):
 *   the admissions of any P ms are at most what Redis counted in the P + leaseMs ms ending there;
 * - a key has one published lease per process at a time (an offer discards what is left of the
 *   one it replaces, and a replaced lease can no longer be spent), so the permits counted before
 *   an instant and admitted after it are the rest of the lease published then, plus the leases
 *   whose Redis calls were in flight then: one with refills under beginRefill, one more for each
 *   refiller that stalled past refillTimeoutMs and was taken over. With leases of at most N
 *   permits, the excess over the limit in any window is at most processes x 2N (processes x
 *   (N + cost) when a refill begins only once the lease cannot serve the request at hand).
 *
 * `clear()` forgets every refusal and lease at once (the limits changed). An answer counts only if
 * asked after the last clear: pass `askedAtMs`, the reading taken before asking Redis, so that an
 * answer under the old limits that arrives after the clear is ignored.
 *
 * The words and their order: local-tier-slot.ts; the argument that no stalled thread causes a
 * wrong answer: docs/design.md, "The local tier's words".
 *
 * Thread-safety: every method may run on any number of threads at once over one handle; none
 * takes a lock or waits. An instance belongs to the thread that made it (a per-thread key cache).
 */
/** How long this thread leaves a stripe it found full alone (see LocalTier#fullUntil). */
const FULL_BACKOFF_MS = 50;

export class LocalTier {
  readonly #table: SlotTable;
  readonly #site: TableSite;
  readonly #w: Int32Array;
  readonly #clock: Clock;
  /** Offset of a slot's state words (refusal, lease, refill) from its base. */
  readonly #so: number;
  readonly #leaseMs: number;
  readonly #refillTimeoutMs: number;
  readonly #owner: number;
  readonly #cacheSize: number;
  /**
   * Per key: its slot, or the inserts count (T_INSERTS) at which this thread found it absent; it
   * stays absent while the count is unchanged, so a key that was never refused costs a Map
   * lookup, not the table's (its UTF-8, hash and probe: 0.2 us of a Redis decision's 1.2 us of JS).
   */
  readonly #cache = new Map<string, TierRef | number>();
  readonly #refills = new Map<string, RefillToken>();
  /**
   * Per stripe, the reading of the tier's clock before which this thread inserts nothing there: a stripe
   * found full (every slot a refusal or lease still running) is not tried again for
   * FULL_BACKOFF_MS. An insert into a full stripe scans it (reclaim and compaction: about 100 us
   * for 1,024 slots); a refusal left uncached costs one Redis call when the key is asked again.
   * Found: with a full tier (new keys, each refused for an hour after its one request) every
   * decision paid that scan, 5.2-5.8k decisions/s against 60k without the tier.
   */
  readonly #fullUntil: Float64Array;
  /** A refusal word being built: [lo, hi]. */
  readonly #out = new Int32Array(2);
  /** T_CONFIG as one 64-bit word (the fingerprint of the configuration the tier serves). */
  readonly #config: BigInt64Array;
  #casLosses = 0;
  #lateSpends = 0;

  private constructor(token: symbol, site: TableSite, cacheSize: number | undefined) {
    if (token !== CONSTRUCT) throw new TypeError('use LocalTier.create(options) or LocalTier.attach(handle)');
    const w = site.words;
    this.#site = site;
    this.#w = w;
    this.#clock = site.clock;
    this.#so = site.stateOffset;
    this.#config = new BigInt64Array(w.buffer, T_CONFIG * 4, 1);
    this.#leaseMs = w[T_LEASE_MS] as number;
    this.#refillTimeoutMs = w[T_REFILL_TIMEOUT_MS] as number;
    this.#cacheSize = cacheSize ?? DEFAULT_CACHE_SIZE;
    // Its own key cache (with absent keys, see #cache), not the site's SlotIndex.
    this.#table = site.newTable(tierSlotState(this.#so, this.#leaseMs, this.#clock));
    this.#fullUntil = new Float64Array(this.#table.stripes).fill(-Infinity);
    // Each instance gets its own owner id for its refill stamps (1 to 2^20 - 1).
    this.#owner = (site.newOwner() % FIELD_MASK) + 1;
  }

  /** Makes a tier. Throws `TypeError`/`RangeError` naming a bad option. */
  static create(options: LocalTierOptions = {}): LocalTier {
    const o = parseTierOptions(options);
    const buffer = createTable(o, { stateWords: STATE_WORDS, globalWords: 0, align8: true, tableClass: 'LocalTier' });
    const w = new Int32Array(buffer);
    // Not shared yet: plain writes. clearAt and the all-keys refusal start at zero (nothing
    // cleared, nothing refused).
    w[H_ALGORITHM] = LOCAL_TIER_TABLE;
    w[T_LEASE_MS] = o.leaseMs;
    w[T_REFILL_TIMEOUT_MS] = o.refillTimeoutMs;
    return new LocalTier(CONSTRUCT, TableSite.created(buffer, 'LocalTier', o.clock), o.cacheSize);
  }

  /** The same tier, for this thread. Throws `TypeError` for anything but a LocalTier handle. */
  static attach(handle: LocalTierHandle, options?: Pick<AttachOptions, 'clock' | 'cacheSize'>): LocalTier {
    const request = attachRequest(handle, options, 'LocalTier', 'table, clock', []);
    return new LocalTier(CONSTRUCT, TableSite.attached(request, 'LocalTier'), request.cacheSize);
  }

  /** The structured-cloneable handle (workerData, postMessage). */
  get handle(): LocalTierHandle {
    return this.#site.handle('sluice.LocalTier');
  }

  /**
   * Records that the tier serves the limiter configuration `config` (its prefix and limits, as
   * text), when it serves none yet, or checks that it serves that one: a limiter calls this once,
   * at construction. Throws LocalTierConfigError, naming `config` and both fingerprints, when the
   * tier serves another (every thread's limiters on one tier then answer under one configuration).
   * @internal
   */
  claim(config: string): void {
    const mine = fingerprint(config);
    // Atomics.compareExchange (sequentially consistent) on the one 64-bit word: of the threads
    // that claim a fresh tier at once exactly one writes its fingerprint, and every other reads
    // that one back; the word is only ever written by compare-and-exchange from what was read, so
    // no claim is lost or torn, and no ordering with the tier's other words is needed (a limiter
    // uses the tier only after its constructor's claim returned).
    const found = Atomics.compareExchange(this.#config, 0, 0n, mine);
    if (found !== 0n && found !== mine) throw this.#mismatch(config, mine, found);
  }

  /**
   * Moves the tier's claim from configuration `from` to `to` (a RedisPolicyLimiter's setRules):
   * done when it serves `from`, nothing to do when it serves `to` already (another thread's
   * limiter moved it). Throws LocalTierConfigError, changing nothing, when it serves another.
   * Returns whether this call moved it.
   * @internal
   */
  reclaim(from: string, to: string): boolean {
    const old = fingerprint(from);
    const mine = fingerprint(to);
    // Atomics.compareExchange: moves the word from `old` only if it still holds `old`, atomically
    // against every other thread's claim or move (sequentially consistent, as in claim).
    const found = Atomics.compareExchange(this.#config, 0, old, mine);
    if (found !== old && found !== mine) throw this.#mismatch(to, mine, found);
    return found === old && old !== mine;
  }

  #mismatch(config: string, mine: bigint, found: bigint): LocalTierConfigError {
    return new LocalTierConfigError(
      `options.localTier serves another limiter configuration (fingerprint ${fingerprintText(found)}) than this limiter's ` +
      `(${fingerprintText(mine)}: ${config}): a tier's refusals and leases are Redis's answers under one configuration's limits, ` +
      'and a stricter limiter would spend a looser one\'s leases; give each configuration (prefix and limits) its own LocalTier',
      config,
    );
  }

  /** The tier's lease duration, in ms. */
  get leaseMs(): number {
    return this.#leaseMs;
  }

  /** The cached location of `key`, found (or, when `insert`, inserted) on a miss; undefined: not cached. */
  #lookup(key: string, insert: boolean): TierRef | undefined {
    const cached = this.#cache.get(key);
    if (typeof cached === 'object') return cached;
    const w = this.#w;
    // Atomics.load of the inserts count, before the probe: unchanged since this thread found the
    // key absent, no insert has been published since that probe (local-tier-slot.ts, T_INSERTS).
    const inserts = Atomics.load(w, T_INSERTS);
    if (cached === inserts && !insert) return undefined;
    if (typeof key !== 'string') throw new TypeError(`key must be a string, got ${describe(key)}`);
    const table = this.#table;
    const bytes = table.encoder.encode(key);
    // Longer than maxKeyBytes, or a lone surrogate (UTF-8 would store it as U+FFFD, merging such
    // keys): not cached.
    if (bytes < 0) return undefined;
    const hash = table.hashEncoded();
    let slot: number;
    if (insert) {
      const stripe = table.stripeOf(hash);
      // The tier's clock: its entries go idle on it, so a stripe full at one reading stays full
      // until it moves. Read only for a stripe found full (the common insert reads none).
      const fullUntil = this.#fullUntil[stripe] as number;
      if (fullUntil > -Infinity) {
        if (this.#clock.now() < fullUntil) return undefined;
        this.#fullUntil[stripe] = -Infinity;
      }
      slot = table.locate(bytes, hash);
      if (slot < 0) this.#fullUntil[stripe] = this.#clock.now() + FULL_BACKOFF_MS;
      // Atomics.add after the insert is published (or found): every thread's record of a key
      // absent is void from here on.
      Atomics.add(w, T_INSERTS, 1);
    } else {
      slot = table.find(bytes, hash);
    }
    let entry: TierRef | number | undefined;
    if (slot >= 0) entry = new TierRef(table.base(slot), table.foundCtrl);
    else if (!insert) entry = inserts; // absent (a full stripe, when inserting, is not recorded)
    if (entry !== undefined && this.#cacheSize > 0) {
      if (this.#cache.size >= this.#cacheSize) this.#cache.clear();
      this.#cache.set(key, entry);
    }
    return typeof entry === 'object' ? entry : undefined;
  }

  /** The tier's clock: the timeline of every `...Ms` argument. */
  now(): number {
    return this.#clock.now();
  }

  /**
   * Ms until `key` may pass, as far as the cache knows; 0 when not known refused. A refusal this
   * thread read before answers until it ends (a raise made since by another thread is seen after).
   */
  refusedFor(key: string, nowMs: number = this.#clock.now()): number {
    if (typeof nowMs !== 'number' || nowMs - nowMs !== 0) throw badNumber('nowMs', nowMs);
    const w = this.#w;
    // The hot path (a key this thread has a slot for) looks no further than this get.
    let cached = this.#cache.get(key);
    // A refusal this thread read before and still running: it holds unless a clear came after it
    // was asked (TierRef). clearAt loaded as below: a clear that this call happens after is seen.
    if (typeof cached === 'object' && nowMs < cached.until && cached.stamp >= loadClearAt(w)) return cached.until - nowMs;
    for (;;) {
      const ref = typeof cached === 'object' ? cached : this.#lookup(key, false);
      if (ref === undefined) return 0;
      const at = ref.base + this.#so + REFUSAL;
      // Atomics.load of hi, then lo: the word only increases, so the pair never says more than a
      // value it really held ("Torn reads", local-tier-slot.ts). clearAt after it.
      const hi = Atomics.load(w, at + 1);
      const lo = Atomics.load(w, at);
      const clearAt = loadClearAt(w);
      // Atomics.load of ctrl after the word: unchanged, the pair was our key's (a reclaim makes the
      // word DEAD before it changes ctrl, and a next occupant starts only after that).
      if (Atomics.load(w, ref.base + S_CTRL) === ref.ctrl && hi !== DEAD_HI) {
        const stamp = (hi >>> 0) * 4096 + (lo >>> 20);
        // No refusal recorded (a fresh slot's word), or one from before the last clear.
        if ((lo & FIELD_MASK) === 0 || stamp < clearAt) return 0;
        const until = stamp + (lo & FIELD_MASK);
        // Kept for the next calls: a raise made since only lengthens the refusal, and the memo is
        // read again from the word once it runs out.
        ref.until = until;
        ref.stamp = stamp;
        const left = until - nowMs;
        return left > 0 ? left : 0;
      }
      this.#cache.delete(key);
      cached = undefined;
    }
  }

  /**
   * Records that no request of cost >= 1 on `key` can pass before `untilMs`, by an answer asked
   * for at `askedAtMs` (default: now). Raises, never lowers; an answer asked before the last
   * clear, or before the recorded one, is ignored; at most 17.5 minutes from askedAt are kept.
   * True when the cache now refuses the key at least that long; false when nothing was recorded.
   */
  refuseUntil(key: string, untilMs: number, askedAtMs?: number): boolean {
    checkFinite('untilMs', untilMs);
    if (askedAtMs !== undefined) checkFinite('askedAtMs', askedAtMs);
    const w = this.#w;
    for (;;) {
      const ref = this.#lookup(key, true);
      if (ref === undefined) return false;
      // This thread's memo of the refusal (TierRef) is read again from the word: a thread sees its
      // own raise at once (other threads' once their memo runs out).
      ref.until = -Infinity;
      const at = ref.base + this.#so + REFUSAL;
      // Atomics.load of each half: the 64-bit compareExchange below is from exactly this pair.
      const hi = Atomics.load(w, at + 1);
      const lo = Atomics.load(w, at);
      // Atomics.load of ctrl after the word: unchanged, the pair was our key's.
      if (Atomics.load(w, ref.base + S_CTRL) !== ref.ctrl || hi === DEAD_HI) {
        this.#cache.delete(key);
        continue;
      }
      const done = this.#writeRefusal(at, hi, lo, untilMs, askedAtMs);
      if (done !== undefined) return done;
    }
  }

  /** The process-wide refusal (the global cap): as `refusedFor`, for every key. */
  allRefusedFor(nowMs: number = this.#clock.now()): number {
    if (typeof nowMs !== 'number' || nowMs - nowMs !== 0) throw badNumber('nowMs', nowMs);
    const w = this.#w;
    // Atomics.load of hi, then lo, then clearAt: as in refusedFor.
    const hi = Atomics.load(w, T_ALL + 1);
    const lo = Atomics.load(w, T_ALL);
    const stamp = stampOf(hi, lo);
    if ((lo & FIELD_MASK) === 0 || stamp < loadClearAt(w)) return 0;
    const left = stamp + (lo & FIELD_MASK) - nowMs;
    return left > 0 ? left : 0;
  }

  /** As `refuseUntil`, for every key (the global cap). */
  refuseAllUntil(untilMs: number, askedAtMs?: number): boolean {
    checkFinite('untilMs', untilMs);
    if (askedAtMs !== undefined) checkFinite('askedAtMs', askedAtMs);
    for (;;) {
      // Atomics.load of each half: the compareExchange is from exactly this pair.
      const hi = Atomics.load(this.#w, T_ALL + 1);
      const lo = Atomics.load(this.#w, T_ALL);
      const done = this.#writeRefusal(T_ALL, hi, lo, untilMs, askedAtMs);
      if (done !== undefined) return done;
    }
  }

  /** One attempt to write a refusal word read as (hi, lo): decided, or undefined after a lost race. */
  #writeRefusal(at: number, hi: number, lo: number, untilMs: number, askedAtMs: number | undefined): boolean | undefined {
    // The reading after the loads; clearAt after it (a clear in between only voids our answer).
    const now = this.#clock.now();
    const outcome = refusalWrite(hi, lo, untilMs, askedAtMs ?? now, now, loadClearAt(this.#w), this.#out);
    if (outcome !== WRITE) return outcome === HELD;
    // 64-bit compareExchange from the pair read to a larger value. A thread stopped before it
    // writes nothing; one that resumes later lands only if the word still holds that pair, in this
    // occupant (no later occupant ever holds it: "Reuse", local-tier-slot.ts).
    if (cas64(this.#w, at, hi, lo, this.#out[1] as number, this.#out[0] as number)) return true;
    this.#casLosses++;
    return undefined;
  }

  /** Forgets every refusal and lease at once: answers asked up to now (this ms included) no longer count. */
  clear(): void {
    const next = Math.min(Math.max(Math.floor(this.#clock.now()) + 1, 0), LIMIT_MS - 1);
    const w = this.#w;
    for (;;) {
      // Atomics.load of each half: the compareExchange is from exactly this pair; raise only.
      const lo = Atomics.load(w, T_CLEAR);
      const hi = Atomics.load(w, T_CLEAR + 1);
      if (stampOf(hi, lo) >= next) return;
      // 64-bit compareExchange from the pair read: clearAt only ever rises; lost, look again.
      if (cas64(w, T_CLEAR, hi, lo, hiOf(next), loOf(next, 0))) return;
      this.#casLosses++;
    }
  }

  /**
   * Spends `cost` permits of `key`'s lease, if it holds that many and has not expired at `nowMs`
   * (default: a reading taken after the lease is loaded). True: admitted. A spend whose clock
   * reading after its compare-and-swap is past the lease's expiry (or after a clear) is lost,
   * not admitted.
   */
  take(key: string, cost = 1, nowMs?: number): boolean {
    if (cost !== 1) integerInRange('cost', cost, 1, MAX_PERMITS);
    if (nowMs !== undefined && (typeof nowMs !== 'number' || nowMs - nowMs !== 0)) throw badNumber('nowMs', nowMs);
    const w = this.#w;
    for (;;) {
      const ref = this.#lookup(key, false);
      if (ref === undefined) return false;
      const at = ref.base + this.#so + LEASE;
      // Atomics.load of lo, then hi. Our compareExchange on lo lands on a value Z at or after the
      // one hi came from; lease stamps never decrease, so Z's stamp is at least the pair's: the
      // expiry judged below is never later than that of the lease we spend from.
      const lo = Atomics.load(w, at);
      const hi = Atomics.load(w, at + 1);
      // Atomics.load of ctrl after the word: unchanged, the pair was our key's.
      if (Atomics.load(w, ref.base + S_CTRL) !== ref.ctrl) {
        this.#cache.delete(key);
        continue;
      }
      const count = lo & FIELD_MASK;
      if (hi === DEAD_HI || count === NONE || count < cost) return false;
      const stamp = stampOf(hi, lo);
      const expiry = stamp + this.#leaseMs;
      const now = nowMs ?? this.#clock.now();
      if (now >= expiry || stamp < loadClearAt(w)) return false;
      // compareExchange on lo: takes cost permits from whatever lease holds this exact count and
      // stamp low bits now. Lost to another thread: count it and decide again.
      if (Atomics.compareExchange(w, at, lo, (lo - cost) | 0) !== lo) {
        this.#casLosses++;
        continue;
      }
      // After the compare-and-swap: a reading before the expiry, no clear since, and ctrl still
      // ours (the spend landed on our key's lease). A thread stopped anywhere before this point
      // reads the clock only now, so a spend made late is not admitted.
      if (this.#clock.now() < expiry && stamp >= loadClearAt(w) && Atomics.load(w, ref.base + S_CTRL) === ref.ctrl) return true;
      this.#lateSpends++;
      return false;
    }
  }

  /**
   * Claims `key`'s refill for this instance: true unless another refill began less than
   * refillTimeoutMs before `nowMs` (default: now). False also when the key cannot be cached.
   */
  beginRefill(key: string, nowMs?: number): boolean {
    if (nowMs !== undefined) checkFinite('nowMs', nowMs);
    const w = this.#w;
    for (;;) {
      const ref = this.#lookup(key, true);
      if (ref === undefined) return false;
      const at = ref.base + this.#so + REFILL;
      // Atomics.load of each half: the compareExchange is from exactly this pair.
      const lo = Atomics.load(w, at);
      const hi = Atomics.load(w, at + 1);
      // Atomics.load of ctrl after the word: unchanged, the pair was our key's.
      if (Atomics.load(w, ref.base + S_CTRL) !== ref.ctrl) {
        this.#cache.delete(key);
        continue;
      }
      const now = nowMs ?? this.#clock.now();
      const t = stampAt(now);
      if (t < 0) return false;
      if ((hi | lo) !== 0 && now - stampOf(hi, lo) < this.#refillTimeoutMs) return false;
      const token: RefillToken = { at, hi: hiOf(t), lo: loOf(t, this.#owner) };
      // 64-bit compareExchange from the free word or an expired stamp (a refiller that stopped):
      // only one thread takes it. The stamp only saves Redis calls: safety never depends on it.
      if (cas64(w, at, hi, lo, token.hi, token.lo)) {
        this.#refills.set(key, token);
        return true;
      }
      this.#casLosses++;
    }
  }

  /** Ends this instance's refill of `key`; false if it held none or was taken over. */
  endRefill(key: string): boolean {
    if (typeof key !== 'string') throw new TypeError(`key must be a string, got ${describe(key)}`);
    const token = this.#refills.get(key);
    if (token === undefined) return false;
    this.#refills.delete(key);
    // 64-bit compareExchange from our own token: a refill taken over is left to its new owner.
    return cas64(this.#w, token.at, token.hi, token.lo, 0, 0);
  }

  /**
   * Publishes a lease of `permits` for `key`, asked for from Redis at `askedAtMs` (before the
   * request was sent): spendable until askedAtMs + leaseMs. It replaces the key's lease, whatever
   * is left of it, unless that one was asked for later (then this one is refused). False when not
   * published: already expired, asked before the last clear, a later lease there, or not cached.
   */
  offer(key: string, permits: number, askedAtMs: number): boolean {
    integerInRange('permits', permits, 1, MAX_PERMITS);
    checkFinite('askedAtMs', askedAtMs);
    const w = this.#w;
    for (;;) {
      const ref = this.#lookup(key, true);
      if (ref === undefined) return false;
      const at = ref.base + this.#so + LEASE;
      // Atomics.load of each half: the 64-bit compareExchange below is from exactly this pair.
      const lo = Atomics.load(w, at);
      const hi = Atomics.load(w, at + 1);
      // Atomics.load of ctrl after the word: unchanged, the pair was our key's.
      if (Atomics.load(w, ref.base + S_CTRL) !== ref.ctrl) {
        this.#cache.delete(key);
        continue;
      }
      // The reading after the loads.
      const now = this.#clock.now();
      if (hi === DEAD_HI) {
        // A reclaim closed the lease word. Complete it if the refusal is idle (the same
        // compareExchange the reclaimer makes) and insert the key again; else not cached now.
        if (retireSlot(w, ref.base + this.#so, this.#leaseMs, this.#clock) === NOT_IDLE) return false;
        this.#table.finishReclaim(ref.base, ref.ctrl);
        this.#cache.delete(key);
        continue;
      }
      const asked = stampAt(Math.min(askedAtMs, now));
      if (asked < 0 || stampAt(now) < 0 || asked + this.#leaseMs <= now || asked < loadClearAt(w)) return false;
      if ((lo & FIELD_MASK) !== NONE && asked < stampOf(hi, lo)) return false;
      // 64-bit compareExchange from the pair read: a thread stopped before it publishes nothing;
      // resumed, it lands only on that same value of this occupant (never a later occupant's).
      if (cas64(w, at, hi, lo, hiOf(asked), loOf(asked, permits))) return true;
      this.#casLosses++;
    }
  }

  /** Reclaims every idle key (refusal over, no live lease); returns how many. O(capacity). */
  sweep(): number {
    const n = this.#table.sweep();
    this.#cache.clear();
    return n;
  }

  /** The table's counts (O(capacity), a snapshot) and this instance's counters. */
  stats(): LocalTierStats {
    const c = this.#table.scan();
    return {
      liveKeys: c.live, maxKeys: this.#w[H_MAX_KEYS] as number, capacity: this.#table.capacity, tombstones: c.tombstones,
      claimed: c.claimed, tableBytes: this.#w.byteLength, keyHeapBytes: this.#table.heap?.byteLength ?? 0,
      casLosses: this.#casLosses, lateSpends: this.#lateSpends,
    };
  }
}
