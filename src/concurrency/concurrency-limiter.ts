import { ForwardClock, type Clock } from '../time/clock.js';
import { ceilNs, ticksAt, ticksToMs, wholeTicksAt } from '../time/ticks.js';
import { integerInRange, positiveFinite } from '../config/check.js';
import { isStale, raiseStamp, secondsAt, unitsAhead } from '../time/stamps.js';
import { HeldLease, type Lease, type LeaseDecision, type LeaseSite } from './lease.js';
import {
  FREE_PLACE, heldFor, leaseParams, NO_FLOOR, leaseSlotState, MAX_IN_FLIGHT, placesHeldIn, readLeaseParams,
  writeLeaseParams, type LeaseParams,
} from './lease-slot.js';
import type { AttachOptions, KeyState, RateLimiterOptions, RateLimiterStats, TableGauges } from '../rate/rate-limiter.js';
import { decisionHookOf, tellDecision, type DecisionHook } from '../rate/decision-hook.js';
import { S_LAST_SEC, S_TAT } from '../table/layout.js';
import type { SlotRef } from '../table/slot-ref.js';
import { RELOCATE } from '../table/slot-index.js';
import { underKeyLock, type LockedDecision } from '../table/slot-lock.js';
import { parseTableOptions } from '../table/table-options.js';
import { AttachRequest, attachRequest, checkOptionsObject, checkRequest, createTable, TableSite } from '../table/table-site.js';
import { namesOf } from '../config/option-names.js';

export type { Lease, LeaseDecision } from './lease.js';

/**
 * At most `maxInFlight` requests in flight per key: a request takes a lease of `cost` places and
 * gives them back with `lease.release()` (or at the end of a `using` block). A lease that is not
 * released within `leaseMs` expires and its places become free again: that is what happens to the
 * leases of a worker that dies (or forgets) before releasing. The state of every key lives in
 * shared memory (lease-slot.ts draws the slot; docs/design.md, section 7, has the wrap-around
 * argument).
 *
 * An acquire takes the key's lock (table/slot-lock.ts), reads its places, decides, and stamps the
 * places it takes, each with a compareExchange from the free value it read. A release needs no
 * lock: it compareExchanges each of its places from its own stamp back to free, so it never frees
 * a place that another lease now holds. While the lock is held no place can become taken, only
 * freed (by a release, or by time), so the places an acquire reads as held were all held at once
 * at its first read: that makes a refusal exact, and keeps reclaims (which try-lock) out.
 *
 * What a worker terminated mid-call leaves: killed before its stamps, nothing; after them, a lease
 * nobody will release, whose places free at expiry; killed holding the key lock, a lock that the
 * next acquire of the key, or a sweep, takes over after `claimTimeoutMs`; killed inside a
 * release, the places it had not yet freed, which free at expiry.
 */

/**
 * Options for `new ConcurrencyLimiter`. `maxKeys`, `clock`, `onFull`, `maxKeyBytes`, `cacheSize`,
 * `hashSeed` and `forceHash` mean what they mean for `RateLimiter`, with the same defaults.
 */
export interface ConcurrencyLimiterOptions
  extends Pick<RateLimiterOptions, 'maxKeys' | 'clock' | 'onFull' | 'maxKeyBytes' | 'cacheSize' | 'hashSeed' | 'forceHash' | 'slotsPerKey'> {
  /** Places per key: requests of cost 1 that may be in flight at once. 1 to 1024. */
  maxInFlight: number;
  /** A lease not released within this many ms expires and frees its places. Positive, finite. */
  leaseMs: number;
  /** Called on this thread after each `tryAcquire` (see RateLimiterOptions.onDecision). */
  onDecision?: DecisionHook;
  /**
   * After this long an unfinished insert, or a key lock whose holder died mid-call, stops
   * blocking others (an insert's slot is reused once 30 times this old, and 30 s at least). Default 1,000 ms.
   */
  claimTimeoutMs?: number;
}

const OPTION_NAMES = namesOf<ConcurrencyLimiterOptions>()([
  'maxInFlight', 'leaseMs', 'maxKeys', 'clock', 'onFull', 'maxKeyBytes', 'cacheSize', 'claimTimeoutMs', 'hashSeed', 'forceHash', 'slotsPerKey',
  'onDecision',
]);

/** A structured-cloneable reference to a concurrency limiter's shared memory. */
export interface ConcurrencyLimiterHandle {
  readonly kind: 'sluice.ConcurrencyLimiter';
  readonly table: SharedArrayBuffer;
  /** The key heap that holds long keys past their slot's words, or null (maxKeyBytes <= 24). */
  readonly keys: SharedArrayBuffer | null;
  readonly clock: SharedArrayBuffer | null;
}

/** What `stats()` reports: a RateLimiter's figures, plus the places held. */
export interface ConcurrencyLimiterStats extends RateLimiterStats {
  /** Places held by unexpired leases, over all keys: a snapshot that may race with writers. */
  placesHeld: number;
}


/**
 * A concurrency limiter whose per-key state lives in shared memory: at most `maxInFlight` places
 * per key are held by unexpired leases at any instant, counted exactly across all threads.
 * Create it once, pass `handle` to workers, and `ConcurrencyLimiter.attach(handle)` there.
 *
 * Thread-safety: `tryAcquire`, `sweep`, `stats` and `Lease.release` may run at the same time on
 * any number of threads over the same handle. `tryAcquire` holds the key's lock while it reads and
 * writes that key's places (different keys never wait on each other; a lock whose holder died is
 * taken over after `claimTimeoutMs`); `release`, `sweep` and `stats` never wait. One *instance* belongs to
 * the thread that made it (it keeps a per-thread cache and scratch memory).
 */
export class ConcurrencyLimiter {
  #p!: LeaseParams;
  #lease!: LeaseSite;
  #site!: TableSite;
  /** This instance's decision hook (options.onDecision), or null. */
  #onDecision: DecisionHook | null = null;
  #words!: Int32Array;
  #clock!: Clock;
  /** The clock as decisions read it: never earlier than this instance's latest reading (see Clock). */
  #forward!: ForwardClock;
  #owner = 0;
  #seen!: Int32Array; //   places as read under the lock
  #aheads!: Int32Array; // ticks until each held place frees
  #taken!: Int32Array; //  places this acquire took
  // The request of the decision in progress, for the locked step (no closure per call).
  #base = 0;
  #cost = 0;
  /** This limiter's side of the locked protocol (table/slot-lock.ts): made once. */
  readonly #step: LockedDecision;
  // Results of the last #decideLocked, read by tryAcquire.
  #reason: LeaseDecision['reason'] = 'allowed';
  #held = 0;
  #retryTicks = 0;
  #resetTicks = 0;
  #stamp = 0;
  #expiryTicks = 0;
  #fracMs = 0;
  /** How far the last decision's reading was ahead of the clock's own (0 unless it stepped back). */
  #leadMs = 0;
  /** Set for `reset`'s locked step: it raises the key's floor instead of taking places. */
  #resetting = false;
  /** Whether the last reset found places held. */
  #resetFound = false;

  constructor(options: ConcurrencyLimiterOptions);
  /** @internal `attach`'s way in (see AttachRequest). */
  constructor(options: ConcurrencyLimiterOptions | AttachRequest<ConcurrencyLimiterHandle>);
  constructor(options: ConcurrencyLimiterOptions | AttachRequest<ConcurrencyLimiterHandle>) {
    this.#step = {
      restarts: 0,
      guarded: false,
      spent: false,
      run: (token) => this.#decideLocked(token),
      // The stamps went with a reclaim: a DEAD slot's are wiped by its next insert; in a slot
      // that already holds another key they stay until they expire (that key is overcharged,
      // never undercharged: freeing them could free a stamp of its own that equals ours).
      lost: () => {},
    };
    if (options instanceof AttachRequest) {
      this.#setup(TableSite.attached(options, 'ConcurrencyLimiter'), options.cacheSize);
      this.#onDecision = options.option('onDecision') as DecisionHook | null ?? null;
      return;
    }
    checkOptionsObject(options, OPTION_NAMES, 'ConcurrencyLimiter', '{ maxInFlight, leaseMs, maxKeys }');
    const onDecision = decisionHookOf<string>(options.onDecision);
    const maxInFlight = integerInRange('options.maxInFlight', options.maxInFlight, 1, MAX_IN_FLIGHT);
    const leaseMs = positiveFinite('options.leaseMs', options.leaseMs);
    const p = leaseParams(maxInFlight, leaseMs);
    const t = parseTableOptions(options);
    // Every check above passed: only now is memory allocated. The buffer is not shared yet, so
    // plain writes fill its header; attach() reads everything back from there.
    // The places, then the floor word (lease-slot.ts).
    const buffer = createTable(t, { stateWords: maxInFlight + 1, globalWords: 0, tableClass: 'ConcurrencyLimiter' });
    writeLeaseParams(new Int32Array(buffer), p);
    this.#setup(TableSite.created(buffer, 'ConcurrencyLimiter', t.clock), t.cacheSize);
    this.#onDecision = onDecision;
  }

  #setup(site: TableSite, cacheSize: number | undefined): void {
    const p = readLeaseParams(site.words);
    this.#site = site;
    this.#clock = site.clock;
    this.#forward = new ForwardClock(site.clock);
    this.#p = p;
    this.#owner = site.newOwner();
    const forward = this.#forward;
    site.open(leaseSlotState(p, site.stateOffset, this.#owner, site.lockAges, forward, (ms) => forward.raiseTo(ms)), cacheSize);
    this.#words = site.words;
    this.#lease = { words: this.#words, clock: this.#clock, p, stateOffset: site.stateOffset };
    this.#seen = new Int32Array(p.maxInFlight);
    this.#aheads = new Int32Array(p.maxInFlight);
    this.#taken = new Int32Array(p.maxInFlight);
  }

  /**
   * Returns a limiter over the same shared memory as the one that made `handle`, for use on this
   * thread. Throws `TypeError` for anything that is not a ConcurrencyLimiter handle.
   * Thread-safety: call it on the thread that will use the result.
   */
  static attach(handle: ConcurrencyLimiterHandle, options?: AttachOptions): ConcurrencyLimiter {
    decisionHookOf(options?.onDecision);
    return new ConcurrencyLimiter(attachRequest(handle, options, 'ConcurrencyLimiter'));
  }

  /** The structured-cloneable handle: pass it in `workerData`, `postMessage` or a piscina task. */
  get handle(): ConcurrencyLimiterHandle {
    return this.#site.handle('sluice.ConcurrencyLimiter');
  }

  /** Places per key. */
  get maxInFlight(): number {
    return this.#p.maxInFlight;
  }

  /** How long a lease lasts unless released (as given; stamps round it up to whole ticks). */
  get leaseMs(): number {
    return this.#p.leaseMs;
  }

  /**
   * Takes a lease of `cost` places on `key` if that many are free, in one atomic step: allowed
   * iff places held by unexpired leases + cost <= maxInFlight. `cost` is an integer >= 0; 0 is a
   * probe that answers without taking anything. A refused request changes nothing.
   */
  tryAcquire(key: string, cost = 1): LeaseDecision {
    const d = this.#tryAcquire(key, cost);
    if (this.#onDecision !== null) tellDecision(this.#onDecision, key, d.allowed, d.reason, cost);
    return d;
  }

  #tryAcquire(key: string, cost: number): LeaseDecision {
    checkRequest(key, cost);
    const site = this.#site;
    let slot = site.find(key);
    while (slot !== undefined && this.#decide(slot, cost) === RELOCATE) slot = site.findAgain(key);
    if (slot === undefined) return this.#full(key, cost);
    const p = this.#p;
    const allowed = this.#reason === 'allowed';
    let lease: Lease | null = null;
    if (allowed && cost > 0) {
      const places = Array.from(this.#taken.subarray(0, cost));
      lease = new HeldLease(key, cost, ticksToMs(this.#expiryTicks, p), this.#lease, site.lasting(slot), this.#stamp, this.#expiryTicks, places);
    }
    return {
      allowed,
      remaining: p.maxInFlight - this.#held,
      retryAfterMs: allowed ? 0 : this.#retryTicks === Infinity ? Infinity : this.#untilMs(this.#retryTicks),
      resetAfterMs: this.#untilMs(this.#resetTicks),
      reason: this.#reason,
      lease,
    };
  }

  /**
   * The key's places now, without taking any and without inserting the key: what a probe
   * (`cost` 0) reports (`remaining`: free places; `resetAfterMs`: until the last lease held
   * expires), or null when the table holds no state for the key (every place is free).
   */
  get(key: string): KeyState | null {
    checkRequest(key, 0);
    const site = this.#site;
    let slot = site.peek(key);
    while (slot !== undefined && this.#decide(slot, 0) === RELOCATE) slot = site.peekAgain(key);
    if (slot === undefined) return null;
    return { remaining: this.#p.maxInFlight - this.#held, resetAfterMs: this.#untilMs(this.#resetTicks) };
  }

  /**
   * Frees every place of `key` at once, under the key's lock: every lease taken on it so far reads
   * as expired (its `release` then returns whatever it finds, and can free no place a later lease
   * holds: lease-slot.ts, the floor). True if any place was held; a key the table does not hold is
   * not inserted. The key's slot is reclaimed only once those leases' own expiries have passed.
   */
  reset(key: string): boolean {
    checkRequest(key, 0);
    const site = this.#site;
    this.#resetting = true;
    this.#resetFound = false;
    let slot = site.peek(key);
    try {
      while (slot !== undefined && this.#decide(slot, 0) === RELOCATE) slot = site.peekAgain(key);
    } finally {
      this.#resetting = false;
    }
    return slot !== undefined && this.#resetFound;
  }

  /** Reclaims the slots of keys that hold no unexpired lease; returns how many. */
  sweep(): number {
    return this.#site.sweep();
  }

  /** The table's gauges, from counts it keeps as it goes (O(1)): see RateLimiter.gauges. */
  gauges(): TableGauges {
    return this.#site.gauges();
  }

  /** Counts keys, slots and held places. O(capacity * maxInFlight): for monitoring only. */
  stats(): ConcurrencyLimiterStats {
    return {
      ...this.#site.report(this.#step.restarts),
      placesHeld: placesHeldIn(this.#site.table, this.#site.stateOffset, this.#forward.now(), this.#p),
    };
  }

  /** Locks the key at `slot` and decides (table/slot-lock.ts); DONE, or RELOCATE when the slot no longer holds it. */
  #decide(slot: SlotRef, cost: number): number {
    this.#base = slot.base;
    this.#cost = cost;
    return underKeyLock(this.#words, slot.base, slot.ctrl, this.#owner, this.#site.lockAges, this.#step);
  }

  /**
   * With the key locked: reads the places, decides, takes `cost` free places if allowed and
   * clears expired ones. False if a place changed under us (the caller decides again).
   */
  #decideLocked(token: number): boolean {
    this.#step.spent = false;
    const at = this.#base + this.#site.stateOffset;
    const lastSecAt = this.#base + S_LAST_SEC;
    const cost = this.#cost;
    const p = this.#p;
    const w = this.#words;
    const n = p.maxInFlight;
    const seen = this.#seen;
    // The clock after taking the lock: no earlier than any stamp writer's reading (see lease-slot.ts).
    let nowMs = this.#forward.now();
    let nowSec = secondsAt(nowMs);
    // Atomics.load of every place, then of lastSec: an acquire raises lastSec before it stamps,
    // so the lastSec read here is at least the second of every stamp read before it.
    for (let i = 0; i < n; i++) seen[i] = Atomics.load(w, at + i);
    // Atomics.load of the floor word: written only under the key lock, which we hold.
    const floorSeen = Atomics.load(w, at + n);
    const lastSec = Atomics.load(w, lastSecAt);
    // A stamp ahead of the reading: the clock stepped back behind an acquire of this key. Decide
    // at the start of the stamp's second, where every lease taken since decodes as held until it
    // expires (see Clock). The places read above can only have been freed since, not taken.
    const ahead = unitsAhead(nowSec, lastSec);
    if (ahead !== 0) {
      nowSec += ahead;
      nowMs = nowSec * 1000;
    }
    // Where the clock itself is behind the reading decided at: waits are reported from it.
    this.#leadMs = Math.max(0, nowMs - this.#forward.rawMs);
    const nowTicks = wholeTicksAt(nowMs, p);
    const now32 = ticksAt(nowMs, p);
    this.#fracMs = Math.max(0, nowMs - ticksToMs(nowTicks, p)); // the reading's part below a tick
    const stale = isStale(nowSec, lastSec, p.staleSec);
    // The floor counts while it is ahead of now (heldFor); on a stale key every place is free.
    const floor = stale ? NO_FLOOR : floorSeen;
    let held = 0;
    let longest = 0;
    for (let i = 0; i < n; i++) {
      const ahead = heldFor(seen[i] as number, now32, stale, floor);
      if (ahead === 0) continue;
      this.#aheads[held++] = ahead;
      if (ahead > longest) longest = ahead;
    }
    this.#held = held;
    this.#resetTicks = longest;
    this.#retryTicks = 0;
    let take = 0;
    if (cost > n) {
      this.#reason = 'exceeds-burst';
      this.#retryTicks = Infinity;
    } else if (held + cost > n) {
      this.#reason = 'limited';
      // The (held + cost - n)-th place to expire is the one that lets this request pass.
      this.#retryTicks = this.#aheads.subarray(0, held).sort()[held + cost - n - 1] as number;
    } else {
      this.#reason = 'allowed';
      take = cost;
      this.#step.spent = cost > 0; // once its stamps land (a false return discards the try)
    }
    // Atomics.load of the lock word after every read, before the first write: still ours, no
    // reclaim can have taken the key since we locked, so what we read was its places, and each
    // write below is a compareExchange from those values (table/slot-lock.ts, underKeyLock).
    if (Atomics.load(w, this.#base + S_TAT) !== token) return false;
    if (this.#resetting) return this.#raiseFloor(at + n, floorSeen, held, (now32 + longest) | 0, lastSecAt, lastSec, nowSec);
    // A floor no longer ahead of now (or on a stale key) is cleared before it can age into the
    // wrap-around: compareExchange under the lock, from the value read.
    if (floorSeen !== NO_FLOOR && (stale || ((floorSeen - now32) | 0) <= 0)) Atomics.compareExchange(w, at + n, floorSeen, NO_FLOOR);
    let expiry = nowTicks + p.leaseTicks;
    let stamp = (now32 + p.leaseTicks) | 0;
    // Above a floor still ahead of now (one tick past it at most: the floor is a stamp taken
    // before now), so that a place's stamps only ever grow (lease-slot.ts).
    const under = floor === NO_FLOOR || ((floor - now32) | 0) <= 0 ? 0 : (floor + 1 - stamp) | 0;
    if (under > 0) { expiry += under; stamp = (stamp + under) | 0; }
    if (stamp === FREE_PLACE) { expiry += 1; stamp = (stamp + 1) | 0; } // never stamp the free marker: one tick later
    this.#stamp = stamp;
    this.#expiryTicks = expiry;
    if (take > 0) raiseStamp(w, lastSecAt, lastSec, nowSec); // only ever forward
    let taken = 0;
    for (let i = 0; i < n; i++) {
      const v = seen[i] as number;
      if (v === FREE_PLACE && taken === take) continue;
      if (heldFor(v, now32, stale, floor) > 0) continue;
      if (taken < take) {
        // compareExchange from the value read under the lock: fails only if a late release
        // freed this expired place meanwhile, or a thread whose lock we took over wrote it.
        if (Atomics.compareExchange(w, at + i, v, stamp) !== v) {
          this.#giveBack(at, taken);
          return false;
        }
        this.#taken[taken++] = i;
      } else {
        // compareExchange of an expired place to free: keeps old stamps from ageing into the
        // wrap-around; losing to a release (which also frees it) is fine.
        Atomics.compareExchange(w, at + i, v, FREE_PLACE);
      }
    }
    if (take > 0) {
      this.#held = held + take;
      this.#resetTicks = Math.max(longest, expiry - nowTicks);
    }
    return true;
  }

  /**
   * `reset`'s locked step, the lock checked: raises lastSec (a floor must decode while the key is
   * not stale), then the floor word to `top`, the latest stamp held, by compareExchange from the
   * value read. Nothing when no place was held. False if the lock was lost meanwhile.
   */
  #raiseFloor(floorAt: number, floorSeen: number, held: number, top: number, lastSecAt: number, lastSec: number, nowSec: number): boolean {
    this.#resetFound = held > 0;
    if (held === 0) return true;
    const w = this.#words;
    raiseStamp(w, lastSecAt, lastSec, nowSec);
    const floor = top === NO_FLOOR ? (top + 1) | 0 : top; // never store the no-floor marker: one tick later
    this.#held = 0;
    this.#resetTicks = 0;
    return Atomics.compareExchange(w, floorAt, floorSeen, floor) === floorSeen;
  }

  /** Ms from the clock's own reading until `ticks` after the decision's tick (0 for 0). */
  #untilMs(ticks: number): number {
    return ticks === 0 ? 0 : ceilNs(ticksToMs(ticks, this.#p) - this.#fracMs + this.#leadMs);
  }

  /** Frees the first `count` places of `#taken` if they still hold this decision's stamp. */
  #giveBack(at: number, count: number): void {
    for (let i = 0; i < count; i++) {
      // compareExchange from our own stamp: only undoes our own write.
      Atomics.compareExchange(this.#words, at + (this.#taken[i] as number), this.#stamp, FREE_PLACE);
    }
  }

  /** The key found no slot: refused, or allowed untracked (onFull 'allow'). */
  #full(key: string, cost: number): LeaseDecision {
    const allowed = this.#site.allowWhenFull;
    const lease = allowed && cost > 0
      ? new HeldLease(key, cost, this.#clock.now() + this.#p.leaseMs, null, null, FREE_PLACE, 0, [])
      : null;
    return { allowed, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'table-full', lease };
  }
}
