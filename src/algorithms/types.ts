/**
 * The contract between the state engines (`../rate/lockfree-engine.ts`, `../rate/locked-engine.ts`)
 * and each algorithm.
 *
 * An algorithm keeps `stateWords` int32 words per key and limit. It never takes locks or reads a
 * clock: an engine calls it with one clock reading (`Moment`) for the whole decision, so an
 * algorithm is a pure function of its words, the moment and the cost. An algorithm whose state
 * commits in one compareExchange (`lockFree`) runs under the lock-free engine, with no lock; the
 * sliding log runs under the locked engine, with the key's lock held.
 *
 * Thread-safety: implementations are stateless and may be shared by every thread; every write is
 * a compareExchange from a snapshot (see `LimitAlgorithm`), so a stalled caller cannot write over
 * state that moved on.
 */

/** The algorithms a `RateLimiter` can run (option `algorithm`). */
export type AlgorithmName =
  | 'gcra' //            token bucket with its own burst and rate (burst 1: a leaky bucket used as a meter)
  | 'fixed-window' //    a count per window aligned to multiples of periodMs on the limiter's clock
  | 'sliding-window' //  two-window counter, the previous window weighted by how much still overlaps
  | 'sliding-log'; //    exact: the times of the last `permits` admissions

/** One clock reading, shared by every limit of a decision. */
export interface Moment {
  /** Milliseconds on the limiter's clock. */
  ms: number;
  /** Whole seconds on the limiter's clock. */
  sec: number;
}

/** One limit's answer; the engine combines these across limits. */
export interface Verdict {
  allowed: boolean;
  /** Cost-1 requests that would still pass right now, after this decision. */
  remaining: number;
  /** 0 when allowed; else how long until the same request would pass (Infinity: never). */
  waitMs: number;
  /** How long until this limit's state equals a fresh key's. */
  resetMs: number;
  /**
   * Set by `reserve`: the longest wait at which what this limit counted still holds (a window
   * counts a reservation in one window, so the request must act before that window ends);
   * Infinity for GCRA, whose slots hold for any later act.
   */
  latestMs: number;
  /**
   * Set by the caller: whether `remaining`, `waitMs` and `resetMs` are wanted. When false (an
   * `allow()`), an algorithm may set only `allowed` (and `waitMs` Infinity for a cost it can never pass).
   */
  detail: boolean;
}

/**
 * A limit, compiled for one algorithm. A decision is snapshot, decide, commit:
 * - `load` takes a snapshot of the state words (the engine loads every limit before it reads the
 *   clock, so no stored state is later than the reading it is judged at);
 * - `check` decides on that snapshot alone, writing nothing;
 * - `commit` writes what `check` decided with compareExchange from the snapshot, the algorithm's
 *   commit word last, and fails if any of them changed since `load`. A thread that stalled (or
 *   whose lock was taken over) can therefore never write a decision made on state that moved on.
 * - `undo` takes back the last commit while nothing else changed the state (exact), for a
 *   decision whose later limit could not commit.
 *
 * Thread-safety: one instance per thread (it holds the snapshot); the words it reads and writes
 * are shared, and every write is a compareExchange from the value the snapshot holds.
 */
export interface LimitAlgorithm {
  readonly stateWords: number;
  /** Its state starts with a 64-bit word, so it must start on an even word (see `group`). */
  readonly align8?: boolean;
  /** GCRA (either width): a state that is one TAT, which a slot placed at a later act moves for every request before it. */
  readonly gcra?: boolean;
  /** A key whose last admission is older than this many seconds is fresh for this limit. */
  readonly staleSec: number;
  /** The whole state commits in one compareExchange, so it needs no lock (every algorithm but the log). */
  readonly lockFree: boolean;
  /** Writes a fresh state at `at` (the slot is not visible to other threads yet, or locked). */
  init(w: Int32Array, at: number, m: Moment): void;
  /**
   * Optional: writes the state at `at` fresh over its words as a reset under the key's lock read
   * them (`before`, from index `from`), for a state whose word-by-word rewrite in index order
   * could show a decision that takes the lock over a state no sequence of decisions leaves (the
   * log). `FRESH_ALL` once its first write landed: every later write is a compareExchange from
   * the value read, and a word that changed since is a newer holder's and stays. `FRESH_NONE`
   * when its first write did not land (nothing written).
   */
  writeFresh?(w: Int32Array, at: number, before: Int32Array, from: number): number;
  /** Takes the snapshot of the state at `at`. */
  load(w: Int32Array, at: number): void;
  /** Decides on the snapshot. `stale` says the key's state is certainly fresh. */
  check(m: Moment, stale: boolean, cost: number, v: Verdict): void;
  /**
   * Spends what the last `check` allowed (cost > 0), by compareExchange from the snapshot. False
   * when the state changed since `load`: nothing of this limit was written that counts.
   */
  commit(w: Int32Array, at: number, m: Moment): boolean;
  /** Takes back the last commit if the state still holds exactly what it wrote; false otherwise. */
  undo(w: Int32Array, at: number): boolean;
  /**
   * Like `check`, but a request that must wait passes when the wait is at most `maxWaitMs` (a
   * reservation, as Go's `Reserve`); `v.waitMs` is then the wait and `v.latestMs` how late the
   * request may act and still be counted where this limit counted it. `notBeforeMs`: the
   * request acts no sooner than this after `m` (another limit's wait), so a window counts it in
   * the window that time falls in, or a later one. Every lock-free algorithm has it (not the
   * sliding log).
   */
  reserve?(m: Moment, stale: boolean, cost: number, maxWaitMs: number, v: Verdict, notBeforeMs: number): void;
  /**
   * Where the last commit counted, for `refund`, as two int32 words: a GCRA slot's start in ticks
   * modulo 2^64 ([low, high]); a window's first word value and index.
   */
  slotStart?(out: Int32Array): void;
  /**
   * Windows: whether the last check or force decided a later window than its reading's (the
   * stored one, ahead of the reading: a newer decision's, or a reservation's).
   */
  decidedLater?(): boolean;
  /**
   * Gives back a reservation that has not acted (`cost`, counted where `slotStart` said): a GCRA
   * slot's part still ahead of `m`, a window's count while the state still holds that window;
   * false if nothing could be. See docs/design.md, "Reservations". `forgotten`, when given, is
   * asked after each snapshot of the state, before its compareExchange: true (the key was reset
   * or blocked since the reservation), and nothing is given back.
   */
  refund?(w: Int32Array, at: number, m: Moment, startLo: number, startHi: number, cost: number, exact?: boolean, forgotten?: (() => boolean) | null): boolean;
  /**
   * `check` for a penalty or a block (RateLimiter.penalty/block over several GCRA limits, and
   * PolicyLimiter's), whose `commit` then only ever adds to the state (but for a reward, below):
   * `blockMs` < 0 spends `cost` even past the burst;
   * `blockMs` >= 0 raises the debt to what refuses until `blockMs` after `m` (never lowered: a
   * state that owes that much already gets one tick more, so that its word changes and another
   * decision's `undo` from a value it wrote cannot land over the block). `v.allowed` false: the
   * state cannot hold that much (nothing to commit); with `clamp` (a limit decided again after a
   * lost race) it holds as much as it can instead. A negative `cost` with `blockMs` < 0 is a
   * reward: it gives back, never below a fresh key's state, so its commit takes from the state;
   * only under the key's lock (PolicyLimiter.reward) or its give-back guard
   * (LockFreeEngine.giveBack), whose undos know of it. The windows' force is for penalties and
   * rewards on their counts (a window's penalty runs under the give-back guard as well:
   * LockFreeEngine.forceGuarded, it is clamped); a block (`blockMs` >= 0) leaves their counts
   * (allowed, nothing changed): the key's block word holds it (block-until.ts), and the controls
   * refuse a block on windows that keep none. The sliding log's answers `v.allowed` false.
   * `sinceMs`, for a GCRA reward: the reading of the spend it gives back (a spend's give-back:
   * only what of that spend's slot is still ahead at `m`, math/gcra.ts `unspentTicks`), or
   * Infinity for none; the windows bound theirs otherwise (LockFreeEngine.giveBack's `within`).
   */
  force?(m: Moment, stale: boolean, cost: number, blockMs: number, clamp: boolean, v: Verdict, sinceMs?: number): void;
  /** Whether the state equals a fresh key's (so the key may be reclaimed). Loads its own snapshot. */
  idle(w: Int32Array, at: number, m: Moment, stale: boolean): boolean;
}

/** `writeFresh` (and `FreshState.writeLimit`): its first word landed (the limit counts as written), or nothing was. */
export const FRESH_ALL = 0;
export const FRESH_NONE = 1;

/** Writes `next` over `prev` at `i` only if it still holds `prev`. */
export function swap(w: Int32Array, i: number, prev: number, next: number): boolean {
  // compareExchange, not store: a writer whose lock was stolen cannot overwrite newer state.
  return Atomics.compareExchange(w, i, prev, next) === prev;
}
