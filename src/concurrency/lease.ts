import type { Clock } from '../time/clock.js';
import { FREE_PLACE, type LeaseParams } from './lease-slot.js';
import { ticksAt, wholeTicksAt } from '../time/ticks.js';
import type { Decision, DecisionReason } from '../rate/rate-limiter.js';
import { S_CTRL } from '../table/layout.js';
import type { SlotRef } from '../table/slot-ref.js';

/**
 * Leases: what `ConcurrencyLimiter.tryAcquire` hands out, and how one gives its places back.
 *
 * Thread-safety: see each export.
 */

/**
 * Places held on a key. Release it as soon as the request is done (later calls return false);
 * `using lease = ...` releases it at the end of the block. It can be released only on the thread
 * that acquired it: sent to another thread, it arrives as plain data without its methods.
 *
 * Thread-safety: `release` is atomic and safe while other threads acquire and release the key.
 */
export interface Lease extends Disposable {
  /** The key it was acquired on. */
  readonly key: string;
  /** Places it holds. */
  readonly cost: number;
  /** When it expires on the limiter's clock (ms), freeing its places if not released before. */
  readonly expiresAtMs: number;
  /**
   * Frees its places. True if this call freed them; false if it was already released, or had
   * already expired (its places may be in use by other leases, which it leaves alone).
   */
  release(): boolean;
  /** Calls `release()`. */
  [Symbol.dispose](): void;
}

/**
 * The answer to one `tryAcquire`: a `Decision`, counted in places, plus the lease.
 * - `remaining`: places free after this decision.
 * - `retryAfterMs`: 0 when allowed; Infinity when cost > maxInFlight; otherwise how long until
 *   enough places free up *by expiry alone*. Leases are usually released sooner, so this is an
 *   upper bound on the wait, exact only if nobody releases.
 * - `resetAfterMs`: how long until every place of the key is free by expiry (0 if none is held).
 */
export interface LeaseDecision extends Decision {
  /** Why: 'exceeds-burst' when cost > maxInFlight (it can never pass). */
  reason: Exclude<DecisionReason, 'global-limit' | 'unavailable'>;
  /** The lease when a request of cost >= 1 passed; null when refused and for a cost-0 probe. */
  lease: Lease | null;
}

/**
 * What a lease needs to release itself: the limiter instance's shared words, clock and params.
 * Thread-safety: read-only after construction.
 */
export interface LeaseSite {
  readonly words: Int32Array;
  readonly clock: Clock;
  readonly p: LeaseParams;
  readonly stateOffset: number;
}

/**
 * The one implementation of `Lease`. An untracked lease (table full, onFull 'allow') has no site.
 * Thread-safety: as `Lease`; `release` is idempotent on the instance.
 */
export class HeldLease implements Lease {
  readonly key: string;
  readonly cost: number;
  readonly expiresAtMs: number;
  readonly #site: LeaseSite | null;
  readonly #slot: SlotRef | null;
  readonly #stamp: number;
  readonly #expiryTicks: number;
  readonly #places: readonly number[];
  #released = false;

  constructor(
    key: string, cost: number, expiresAtMs: number, site: LeaseSite | null, slot: SlotRef | null, stamp: number, expiryTicks: number,
    places: readonly number[],
  ) {
    this.key = key;
    this.cost = cost;
    this.expiresAtMs = expiresAtMs;
    this.#site = site;
    this.#slot = slot;
    this.#stamp = stamp;
    this.#expiryTicks = expiryTicks;
    this.#places = places;
  }

  release(): boolean {
    if (this.#released) return false;
    this.#released = true;
    const site = this.#site;
    const slot = this.#slot;
    if (site === null || slot === null) return true; // untracked: it held no place
    const w = site.words;
    // Atomics.load of ctrl: a changed ctrl means the key was reclaimed, which needs every place
    // free, so this lease had expired and holds nothing now.
    if (Atomics.load(w, slot.base + S_CTRL) !== slot.ctrl) return false;
    // Expired by the whole tick count, or by the exact 32-bit stamp (the whole count is a float,
    // inexact past 2^53 ticks): either says so, and the lease reports that it had expired.
    const nowMs = site.clock.now();
    const expired = wholeTicksAt(nowMs, site.p) >= this.#expiryTicks || ((ticksAt(nowMs, site.p) - this.#stamp) | 0) >= 0;
    const at = slot.base + site.stateOffset;
    let freed = true;
    for (const i of this.#places) {
      // compareExchange from this lease's own stamp: a place taken over after expiry holds a later
      // stamp (or FREE_PLACE) and is left alone.
      if (Atomics.compareExchange(w, at + i, this.#stamp, FREE_PLACE) !== this.#stamp) freed = false;
    }
    return freed && !expired;
  }

  [Symbol.dispose](): void {
    this.release();
  }
}
