import type { LimitAlgorithm, Moment } from '../algorithms/index.js';
import { isStale, raiseToStamp, sameSecondUntil, secondsAt } from '../time/stamps.js';
import { NarrowGcra } from '../algorithms/gcra.js';
import { FixedWindow32 } from '../algorithms/fixed-window-32.js';
import { GlobalBatch, TAKEN } from './global-batch.js';
import { LimitSet, type LimitGroup, type LockedResult, type StateArea } from './limit-set.js';
import { DEAD, S_CTRL, S_LAST_SEC, S_TAT } from '../table/layout.js';
import { secHi, secLo, type SlotRef } from '../table/slot-ref.js';
// DONE and RELOCATE: the outcomes of every multi-word engine, locked or not (rate-limiter.ts reads both alike).
import { RELOCATE } from '../table/slot-index.js';
import { DONE } from '../table/slot-lock.js';
import { freeGuard } from './lockfree-reclaim.js';
import { BUSY, GONE, givingBack, hold, isHolderToken, release } from './give-back-guard.js';
import { resetDone, resetMark, resetSince, resetting } from '../table/reset-marks.js';
import { FreshState, NONE } from './fresh-state.js';
import { OWN_BACKOFF } from './gcra-32.js';
import type { LockAges } from '../table/slot-lock.js';

/** #decideBatched could not use the batch: decide on the cap's word (beside DONE and RELOCATE). */
const FALLBACK_EXACT = 3;
/** `reset` found the key owing and wrote it fresh (beside DONE: it owed nothing, and RELOCATE). */
export const OWED = 4;
/** #writeOnce: no limit's write landed; read and decide again. */
const RETRY = 5;
/** #allowOwn: this thread's own writes are no longer the key's state; nothing counts. Decide from loads. */
const OWN_MISSED = 6;
/** #allowOwn: nothing was written, with no backoff (a new second, or a batch that cannot serve). Decide from loads. */
const OWN_GIVEN_UP = 7;

/**
 * Decisions without a lock, for keys whose every limit commits in one compareExchange (GCRA at
 * either width, fixed and sliding windows), with or without a global cap of the same kind:
 *
 *   1. snapshot the key's limits, then the global cap's, then the key's lastSec (unless this thread
 *      knows a bound on it), then read the clock;
 *   2. decide every limit on the snapshot: a refusal writes nothing;
 *   3. commit the key's limits in order, each by compareExchange from its snapshot; one that lost
 *      a race is decided again at the same reading on a new snapshot of it alone, and when it now
 *      refuses, those before it are taken back and the decision starts again;
 *   4. commit the global cap the same way (it is the hot word: the key's spends stay while it
 *      is decided again); when it now refuses, take back the key's spends and start again;
 *   5. check the slot's guard word and ctrl (a reclaim of this key that raced with the commit).
 *
 * A thread that stops anywhere leaves at worst spends that count for a request it never
 * admitted (conservative); no thread waits for another. See docs/design.md, "Lock-free spends".
 *
 * The guard word (the slot's `tat` word) holds the incarnation's free value (twice its ctrl
 * generation: even), a reclaimer's token (odd) while it checks that the key is idle, or DEAD once
 * it decided to reclaim. A decision that finds a token after committing cancels it (the reclaim
 * then fails); one that finds DEAD, or another incarnation's value, decides again. A give-back
 * (`giveBack`, `reset`, a reservation's `refund`) or an undo holds it while it writes, and every
 * key keeps a give-back epoch after its limits' words, so that an undo never takes back a spend a
 * give-back already gave back (give-back-guard.ts).
 *
 * Thread-safety: one instance per thread (it holds snapshots and the result); any number of threads.
 */
export class LockFreeEngine {
  readonly #w: Int32Array;
  readonly #key: LimitGroup;
  readonly #global: LimitGroup | null;
  readonly #globalArea: StateArea | null;
  readonly #set: LimitSet;
  /** The key's words being decided, and (epoch) what its give-back epoch held before the first commit (#readEpoch). */
  readonly #area: StateArea & { epoch: number } = { lock: 0, lastSec: 0, state: 0, epoch: 0 };
  readonly #moment: Moment = { ms: 0, sec: 0 };
  readonly #clock: () => number;
  readonly result: LockedResult;
  /** Each key limit's own remaining and reset after the last decision with detail (LimitSet). */
  readonly limitRemaining: Float64Array;
  readonly limitResetMs: Float64Array;
  readonly #batch: GlobalBatch | null;
  /** The key's limits when each is one 32-bit GCRA word and there is no cap (#allowGcra), else null. */
  readonly #gcra: NarrowGcra[] | null;
  /**
   * Whether every key limit keeps one int32 word, loaded and written only by int32 Atomics
   * operations (NarrowGcra, FixedWindow32): ctrl may then be read plainly after the snapshot
   * (docs/design.md, "Plain reads of ctrl"). The 64-bit and two-word states are written by a 64-bit
   * compareExchange, which an int32 load does not synchronise with.
   */
  readonly #plainCtrl: boolean;
  #retries = 0;
  /**
   * The second of this thread's latest reading: a guess only (#stampThenRead: when to skip the
   * lastSec load); with its parts as SlotRef stores a second (SlotRef.knowsSec).
   */
  #sec = 0;
  #secHi = 0;
  #secLo = 0;
  /** #read's second, and the readings it holds for (#secondOf): none at first. */
  #readSec = 0;
  #secFromMs = Infinity;
  #secToMs = -Infinity;
  /** Whether #stampThenRead raised the reading to the key's stamp (the clock stepped back behind a decision on the key). */
  #raised = false;
  /**
   * The key's first limit when it keeps one int32 word (NarrowGcra, FixedWindow32), else null:
   * its word tells whether the key's state is still this thread's own write (#stampThenRead).
   */
  readonly #first: NarrowGcra | FixedWindow32 | null;
  /**
   * The key's limit when an `allow()` may start from this thread's own write (#allowOwn): the
   * key's only limit, of one int32 word (NarrowGcra, FixedWindow32), with no cap or one served in
   * batches; else null.
   */
  readonly #own: NarrowGcra | FixedWindow32 | null;
  /**
   * The key's two limits when an `allow()` may start from this thread's own writes to both
   * (#allowOwnTwo: each of one int32 word, no cap or one served in batches); else null. The
   * second's own write is kept in SlotRef.tat2.
   */
  readonly #ownTwo: (NarrowGcra | FixedWindow32)[] | null;
  // The slot being decided, for #takeBack (a bound method: no closure per decision).
  #base = 0;
  #ctrl = 0;
  readonly #takeBack = (n: number): void => {
    this.#undoKey(n);
  };
  /**
   * Whether the slot at #base still holds the incarnation of #ctrl: LimitSet.commit's `holds`
   * on every commit of the key's limits, asked after each new snapshot of a limit that lost its
   * race (so never on a commit that lands at once). Atomics.load (seq-cst) of ctrl after that
   * snapshot's load: a reuse of the slot changes ctrl (its claim) before it writes the next key's
   * states, so a snapshot that read one of those finds ctrl changed here. Without it, a limit
   * decided again after the key was reclaimed and inserted again into the same slot was written
   * into the key's next incarnation, and #settle then sent the decision there to count the
   * request again (found twice: on #allowOwnTwo by an attack, then on the paths from loads by
   * the explorer's own-write-reclaim).
   */
  readonly #stillOurs = (): boolean => Atomics.load(this.#w, this.#base + S_CTRL) === this.#ctrl;
  /** Where the key's give-back epoch word is, from its state's start (after its limits' words). */
  readonly #epochOffset: number;
  /** This instance's owner id, for its holder tokens. */
  readonly #owner: number;
  /** How old another holder's token must be before a give-back takes the guard over (the table's reuse age). */
  readonly #takeOverMs: number;

  constructor(
    w: Int32Array, key: LimitGroup, global: { group: LimitGroup; area: StateArea } | null, clock: () => number,
    guard: { owner: number; ages: LockAges; epochOffset: number },
  ) {
    this.#w = w;
    this.#owner = guard.owner;
    this.#takeOverMs = guard.ages.reclaimAfterMs;
    this.#epochOffset = guard.epochOffset;
    this.#key = key;
    this.#global = global?.group ?? null;
    this.#globalArea = global?.area ?? null;
    this.#set = new LimitSet(w, clock);
    this.#set.cap = global?.group ?? null;
    this.result = this.#set.result;
    this.limitRemaining = this.#set.limitRemaining;
    this.limitResetMs = this.#set.limitResetMs;
    this.#clock = clock;
    // A global cap of one 32-bit GCRA limit is served to allow() in per-thread batches.
    const only = global?.group.algorithms.length === 1 ? global.group.algorithms[0] : undefined;
    this.#gcra = global === null && key.algorithms.every((a) => a instanceof NarrowGcra) ? (key.algorithms as NarrowGcra[]) : null;
    this.#plainCtrl = key.algorithms.every((a) => a instanceof NarrowGcra || a instanceof FixedWindow32);
    const first = key.algorithms[0];
    this.#first = first instanceof NarrowGcra || first instanceof FixedWindow32 ? first : null;
    this.#batch = only instanceof NarrowGcra && global !== null ? GlobalBatch.for(w, global.area, only.params) : null;
    const second = key.algorithms[1];
    const capServes = global === null || this.#batch !== null;
    this.#own = key.algorithms.length === 1 && this.#first !== null && capServes ? this.#first : null;
    this.#ownTwo = key.algorithms.length === 2 && this.#first !== null && (second instanceof NarrowGcra || second instanceof FixedWindow32) && capServes
      ? [this.#first, second]
      : null;
  }

  /** Whether the next decisions fill remaining, retryAfterMs and resetAfterMs (false: `allow()`). */
  set detail(wanted: boolean) {
    this.#set.detail = wanted;
  }

  /** Commits that lost a race (key or global word) and were decided again. */
  get retries(): number {
    return this.#retries + this.#set.retries + (this.#batch?.retries ?? 0);
  }

  /** The clock reading of the last decision (what it was judged at). */
  get nowMs(): number {
    return this.#moment.ms;
  }

  /**
   * Decides for the key at `ref` (its slot and ctrl word) whose state starts at `stateBase`.
   * Fills `result`; returns DONE or RELOCATE.
   */
  decide(ref: SlotRef, stateBase: number, cost: number): number {
    const base = ref.base;
    const ctrl = ref.ctrl;
    const set = this.#set;
    const r = this.result;
    const key = this.#key;
    const area = this.#area;
    area.lock = base + S_TAT;
    area.lastSec = base + S_LAST_SEC;
    area.state = stateBase;
    this.#base = base; // for #takeBack
    this.#ctrl = ctrl;
    if (!set.detail && set.reserving === null) {
      // An admission in the second of this thread's own latest write to the key starts from that
      // write, as Gcra32.decide does (#allowOwn); after a miss, the key's next OWN_BACKOFF load.
      const own = this.#own;
      const two = this.#ownTwo;
      if ((own !== null || two !== null) && cost > 0 && ref.knowsSec(this.#secHi, this.#secLo)) {
        if (ref.ownSkip !== 0) ref.ownSkip--;
        else {
          const outcome = own !== null
            ? this.#allowOwn(ref, base, ctrl, stateBase, cost, own)
            : this.#allowOwnTwo(ref, base, ctrl, stateBase, cost, two as (NarrowGcra | FixedWindow32)[]);
          if (outcome === DONE || outcome === RELOCATE) return outcome;
          if (outcome === OWN_MISSED) ref.ownSkip = OWN_BACKOFF;
        }
      }
      if (this.#gcra !== null) return this.#allowGcra(ref, stateBase, cost);
    }
    let exact = false; // the cap's batch could not serve this decision: decide on its word
    for (;;) {
      const batch = this.#batch;
      if (batch !== null && !exact && !set.detail && set.reserving === null) {
        const outcome = this.#decideBatched(ref, cost, batch);
        if (outcome !== FALLBACK_EXACT) return outcome;
        exact = true;
        continue;
      }
      // 1. Snapshots, then the clock, then ctrl: the reading is not earlier than any state it
      // judges, and an unchanged ctrl means the snapshot belongs to our key's incarnation.
      set.loadStates(key, area);
      const global = this.#global;
      const g = this.#globalArea as StateArea;
      const globalLastSec = global === null ? 0 : set.load(global, g);
      const lastSec = this.#stampThenRead(ref);
      const m = this.#moment;
      // The cap's stamp ahead of the reading (loaded before it): the clock stepped back behind a
      // decision on the cap. Key and cap are decided at one reading: raise it to the stamp's second.
      if (global !== null) raiseToStamp(m, globalLastSec);
      // ctrl after the snapshot: a reused slot is looked up again. The guard is not read here: a
      // key reclaimed under us holds a fresh key's state, so deciding on it is harmless, and
      // #settle finds the DEAD guard after any commit and decides again. A plain read when the
      // key's states are int32 words (#plainCtrl), else Atomics.load.
      if (this.#ctrlAt(base) !== ctrl) return RELOCATE;
      // 2. Decide.
      set.check(key, m, lastSec, cost);
      r.refusedBy = r.allowed ? null : 'key';
      if (!r.allowed) return DONE;
      if (global !== null && !set.checkCap(key, m, lastSec, global, m, globalLastSec, cost)) return DONE;
      if (cost === 0) return DONE;
      // 3. The key's limits, after reading the key's give-back epoch (see #readEpoch). A
      // reservation that waits may place a limit's slot where it acts, past that limit's TAT
      // (NarrowGcra.reserve): a spend's give-back made before it must then give nothing, since its
      // slot no longer ends the TAT. So it moves the epoch on before its commits, as a block does
      // (force): Atomics.add, seq-cst; a give-back checks the epoch after its snapshot (giveBack).
      if (set.reserving !== null && r.retryAfterMs > 0 && this.#epochOffset >= 0) {
        area.epoch = (Atomics.add(this.#w, stateBase + this.#epochOffset, 1) + 1) | 0;
      } else area.epoch = this.#w[stateBase + this.#epochOffset] as number;
      if (!set.commit(key, area, m, lastSec, cost, this.#takeBack, this.#stillOurs)) {
        this.#retries++;
        continue;
      }
      // 4. The global cap: the hot word, retried on its own at the same reading (in commit).
      if (global !== null && !set.commit(global, g, m, globalLastSec, cost)) {
        // Take the key's spends back only while they are on our key and no give-back took them.
        if (!this.#undoKey(key.algorithms.length)) return RELOCATE;
        this.#retries++;
        continue; // the cap now refuses: decide again, to report it from a fresh snapshot
      }
      // 5. A reclaim that judged the key idle before our commit must not complete.
      const outcome = this.#settle(base, ctrl);
      if (outcome === DONE) return this.#stamped(ref);
      // The key was reclaimed under us: our spend went with it. Give the cap back its share
      // and decide again on the key's new slot.
      if (global !== null) set.undo(global, g, global.algorithms.length);
      return RELOCATE;
    }
  }

  /**
   * A penalty (`blockMs` < 0: `cost` spent on every key limit, even past its burst) or a block
   * (`blockMs` >= 0: every key limit raised to refuse until that long after now, never lowered)
   * on the key at `ref`: `decide`'s steps 1, 3 and 5 with each limit's `force` for its `check`
   * (LimitSet.forcing). It only adds to the key's limits, so nothing of it is ever taken back: a
   * limit that lost a race is forced again on its new state, holding as much as it can (a
   * give-back could land over another decision's spend: see LimitSet.undo). A global cap is
   * neither checked nor charged. Fills `result` (allowed false: a limit's state cannot hold it,
   * and nothing was written); returns DONE or RELOCATE.
   */
  force(ref: SlotRef, stateBase: number, cost: number, blockMs: number): number {
    const base = ref.base;
    const ctrl = ref.ctrl;
    const set = this.#set;
    const key = this.#key;
    const area = this.#area;
    area.lock = base + S_TAT;
    area.lastSec = base + S_LAST_SEC;
    area.state = stateBase;
    this.#base = base;
    this.#ctrl = ctrl;
    set.detail = true;
    set.forcing = blockMs;
    // A block forces every limit whatever `cost` says; a penalty of cost 0 is a probe.
    const spend = blockMs >= 0 ? 1 : cost;
    // A block moves the key's give-back epoch on before any of its commits (Atomics.add,
    // seq-cst): a spend's give-back (giveBack with a mark), which loads the epoch on each try
    // before its snapshot, either finds it moved and gives nothing, or read it before this add,
    // and then its compareExchanges, from a snapshot taken before our commits, fail on the words
    // we raised and it looks again. A reward that landed first is raised over (a block raises
    // every limit to its end, never lowers). The undo needs no guard against a GCRA block: it
    // takes back by compareExchange from the word it wrote, which our raise fails. A block is
    // counted in the slot's reset mark around its commits: a reservation's refund after it gives
    // nothing (table/reset-marks.ts).
    if (blockMs >= 0) resetting(this.#w, base);
    if (blockMs >= 0 && this.#epochOffset >= 0) Atomics.add(this.#w, stateBase + this.#epochOffset, 1);
    try {
      for (;;) {
        set.loadStates(key, area);
        const lastSec = this.#stampThenRead(ref);
        const m = this.#moment;
        if (this.#ctrlAt(base) !== ctrl) return RELOCATE;
        set.check(key, m, lastSec, spend);
        if (!this.result.allowed || spend === 0) return DONE;
        // Only a stall past RECHECK_MS, or a slot that no longer holds the key (#stillOurs), makes
        // a forced commit give up: what it committed stays (more debt, never less) and the penalty
        // or block is forced again from new snapshots (on the key's new slot, after RELOCATE).
        if (!set.commit(key, area, m, lastSec, spend, null, this.#stillOurs)) {
          this.#retries++;
          continue;
        }
        // A reclaim that judged the key idle before our commit must not complete; if the key was
        // reclaimed, what we wrote went with it: force again on its new slot.
        return this.#settle(base, ctrl) === DONE ? this.#stamped(ref) : RELOCATE;
      }
    } finally {
      set.forcing = null;
      if (blockMs >= 0) resetDone(this.#w, base);
    }
  }

  /**
   * A penalty on window limits (`cost` > 0): `force`'s spend, held under the key's guard with the
   * epoch moved on after it, as a give-back is. A window's penalty is clamped (it fills at most the
   * window: FixedWindow32.force), and a decision's undo subtracts its own spend from a count: one
   * that committed before the penalty and takes back after it would take from the clamped count,
   * and the window would admit again (an undo holding the guard after us finds the epoch moved
   * and keeps its spend instead). Fills `result`; returns DONE or RELOCATE.
   */
  forceGuarded(ref: SlotRef, stateBase: number, cost: number): number {
    return this.#givingBack(ref.base, ref.ctrl, stateBase, RELOCATE, () => this.force(ref, stateBase, cost, -1));
  }

  /**
   * A reward on the key at `ref`: every key limit gives back `cost` intervals, never below a
   * fresh key's state (each limit's `force` with a negative cost), holding the key's guard, and
   * the key's epoch moved on before the guard goes (give-back-guard.ts). Waits while an undo or
   * another give-back holds the guard. A cap is neither checked nor given back. Each limit is
   * written once (#writeOnce). Fills `result`; returns DONE or RELOCATE. GCRA and window limits
   * (a window gives back from its counts: FixedWindow32.force). `within(ms)`, when given, must
   * hold for the give-back's own reading, the one its commit is made at, and no window limit may
   * decide a window stored ahead of that reading, or nothing is written (DONE, nothing given): so a
   * window's give-back can be kept out of a later window than a spend's.
   */
  giveBack(ref: SlotRef, stateBase: number, cost: number, within: ((ms: number) => boolean) | null = null, mark: SpendMark | null = null): number {
    const { base, ctrl } = ref;
    // A spend's give-back (mark): only where it was counted. A key that moved (compaction) or
    // went and came back keeps its spends (conservative).
    if (mark !== null && (base !== mark.base || ctrl !== mark.ctrl)) return DONE;
    const set = this.#set;
    const key = this.#key;
    const area = this.#area;
    area.state = stateBase;
    return this.#givingBack(base, ctrl, stateBase, RELOCATE, () => {
      set.detail = true;
      set.forcing = -1;
      // A spend's give-back on GCRA limits: no more than what of the spend is still ahead at
      // the give-back's reading, read after its snapshot below (LimitAlgorithm.force).
      set.rewardSinceMs = mark === null ? Infinity : mark.ms;
      try {
        for (;;) {
          // A spend's give-back (mark) gives only while no give-back of any kind, no block and no
          // takeover of the guard ran on the key since the spend's decision read its epoch. Each
          // adds 1 to it: a give-back or a takeover under the guard, a block before its commits
          // (force). Atomics.load on each try, before its snapshot (see force for a block that
          // races it). A reset wrote the state fresh, which counts later admissions, not the
          // spend; a block's end must not move earlier. A reward or another spend's give-back
          // may not have been a reset, but one epoch cannot tell, and giving nothing is
          // conservative (overlapping requests of one key each give back only while no other
          // did since its decision).
          if (mark !== null && Atomics.load(this.#w, stateBase + this.#epochOffset) !== mark.epoch) return DONE;
          set.loadStates(key, area);
          const lastSec = this.#stampThenRead(ref);
          if (this.#ctrlAt(base) !== ctrl) return RELOCATE;
          // And again after the snapshot (Atomics.load, seq-cst): a block or a waiting reservation
          // adds to the epoch before its commits, so a snapshot that holds one of their commits is
          // followed by a load that sees the add (read only before the snapshot, a give-back could
          // load the epoch, then snapshot the state a reservation placed past the TAT, and take
          // part of that reservation's slot).
          if (mark !== null && mark.epoch !== Atomics.load(this.#w, stateBase + this.#epochOffset)) return DONE;
          // A spend's GCRA give-back at a reading raised to the key's stamp (the clock stepped
          // back behind another decision, whose reading may be later than this one within the
          // stamp's second) has no bound to give by: nothing (design.md, section 6). A window's
          // (`within`) is bounded by its window, judged at the raised reading, and goes on
          // (found: returning here kept a window's spend at once after its own admission).
          if (mark !== null && within === null && this.#raised) return DONE;
          const m = this.#moment;
          if (within !== null && !within(m.ms)) return DONE; // before any write: nothing given
          set.check(key, m, lastSec, -cost); // each limit's state after the reward, at one reading
          // Bounded: nothing either into a window stored ahead of the reading (another thread's
          // later window, which a reading behind it, a clock stepped back, still finds).
          if (within !== null && decidedLater(key)) return DONE;
          const w = this.#w;
          const outcome = this.#writeOnce((i) => (key.algorithms[i] as LimitAlgorithm).commit(w, stateBase + (key.offsets[i] as number), m));
          if (outcome !== RETRY) return DONE;
        }
      } finally {
        set.forcing = null;
        set.rewardSinceMs = Infinity;
      }
    });
  }

  /**
   * A reset of the key at `ref`, a give-back as `giveBack` is: every key limit written fresh (every
   * algorithm), each word by compareExchange from what was read (FreshState), each limit once
   * (#writeOnce). A cap keeps its spends. Returns RELOCATE when the slot no longer holds the key,
   * else whether some limit owed anything (OWED) or not (DONE).
   */
  reset(ref: SlotRef, stateBase: number): number {
    const { base, ctrl } = ref;
    const fresh = (this.#fresh ??= new FreshState(this.#key.words));
    return this.#givingBack(base, ctrl, stateBase, RELOCATE, () => {
      const w = this.#w;
      // Whether it owed anything: whether some write landed, in this try or one before.
      fresh.wrote = false;
      // Counted in the slot's reset mark around its writes: a reservation's refund after it
      // gives nothing (table/reset-marks.ts).
      resetting(w, base);
      try {
        return this.#resetWrites(w, base, stateBase, fresh);
      } finally {
        resetDone(w, base);
      }
    });
  }

  /** The reset's tries, under the guard: every key limit written fresh, each once (see `reset`). */
  #resetWrites(w: Int32Array, base: number, stateBase: number, fresh: FreshState): number {
    const key = this.#key;
    for (;;) {
      fresh.read(w, stateBase, key);
      // Atomics.load of lastSec after the words, then the clock: a stamp never later than the
      // reading, and a state written by a recent admission is not judged stale.
      const lastSec = Atomics.load(w, base + S_LAST_SEC);
      const m = this.#read();
      raiseToStamp(m, lastSec);
      const owes = key.algorithms.some((a, i) => !a.idle(w, stateBase + (key.offsets[i] as number), m, isStale(m.sec, lastSec, a.staleSec)));
      if (!owes) return fresh.wrote ? OWED : DONE;
      fresh.prepare(stateBase, key, m);
      // A limit whose state landed counts as written, though a later word of it (a 64-bit
      // GCRA's staleness unit, which a decision raised) did not: reading again would decide on
      // what a decision wrote after seeing the reset (found by an attack: 2 admitted of 1).
      if (this.#writeOnce((i) => fresh.writeLimit(w, stateBase, key, i) !== NONE) !== RETRY) return fresh.wrote ? OWED : DONE;
    }
  }

  /**
   * Writes a give-back's new state into every key limit (`write(i)`: a compareExchange from the
   * give-back's one snapshot, false when a decision wrote the limit since), each limit once: a
   * give-back decided from a state that a decision wrote while the give-back was under way would
   * give that spend back (never below fresh: all of it, on a limit that was fresh), though the
   * decision, which saw the give-back on an earlier limit, comes after it. So RETRY (read and
   * decide again) only while nothing landed; after that a limit that lost its race keeps what
   * the decision wrote, and gives back nothing (conservative). DONE otherwise.
   */
  #writeOnce(write: (i: number) => boolean): number {
    let landed = false;
    for (let i = 0; i < this.#key.algorithms.length; i++) {
      if (write(i)) landed = true;
      else if (!landed) {
        this.#retries++;
        return RETRY;
      }
    }
    return DONE;
  }

  /**
   * Runs `write`, a give-back on the key at `base` (ctrl `ctrl`, state at `stateBase`), under the
   * key's guard, the epoch moved on after it (give-back-guard.ts `givingBack`); `gone` when the
   * slot no longer holds the key.
   */
  #givingBack<T>(base: number, ctrl: number, stateBase: number, gone: T, write: () => T): T {
    return givingBack(this.#w, base, ctrl, freeGuard(ctrl), stateBase + this.#epochOffset, this.#owner, this.#takeOverMs, gone, write);
  }

  /**
   * Where the latest decision counted its spend, the key's give-back epoch it read before its
   * commits, and its reading: a spend's give-back's mark (RateLimiter's windowGiveBack and
   * spendGiveBack), taken right after it.
   */
  spendMark(): SpendMark {
    return { base: this.#base, ctrl: this.#ctrl, epoch: this.#area.epoch, ms: this.#moment.ms };
  }

  /** The reset's scratch, made at the first reset. */
  #fresh: FreshState | null = null;

  /**
   * `decide` for `allow()` when every key limit is one 32-bit GCRA word and there is no cap: the
   * same steps, with each limit keeping its own snapshot and verdict (NarrowGcra.load, admits)
   * instead of the general pass over a Verdict; the commit is LimitSet.commit, as on every path.
   * The configuration the algorithms table's "GCRA, two limits" row measures.
   */
  #allowGcra(ref: SlotRef, stateBase: number, cost: number): number {
    const w = this.#w;
    const r = this.result;
    const base = ref.base;
    const ctrl = ref.ctrl;
    const limits = this.#gcra as NarrowGcra[];
    const offsets = this.#key.offsets;
    for (;;) {
      for (let i = 0; i < limits.length; i++) (limits[i] as NarrowGcra).load(w, stateBase + (offsets[i] as number));
      const lastSec = this.#stampThenRead(ref);
      const m = this.#moment;
      // ctrl after the snapshot, as in decide, but by a plain read: every state word here is an
      // int32 loaded by Atomics.load, so a value written after a reuse of the slot makes that
      // reuse's ctrl visible to this read (docs/design.md, "Plain reads of ctrl").
      if (w[base + S_CTRL] !== ctrl) return RELOCATE;
      r.never = false;
      r.retryAfterMs = 0;
      for (let i = 0; i < limits.length; i++) {
        const a = limits[i] as NarrowGcra;
        if (!a.admits(m, isStale(m.sec, lastSec, a.staleSec), cost)) {
          r.allowed = false;
          r.refusedBy = 'key';
          if (cost > a.params.burst) {
            r.never = true;
            r.retryAfterMs = Infinity;
          }
          return DONE;
        }
      }
      r.allowed = true;
      r.refusedBy = null;
      if (cost === 0) return DONE;
      // The key's give-back epoch, as #readEpoch reads it.
      this.#area.epoch = w[stateBase + this.#epochOffset] as number;
      if (!this.#set.commit(this.#key, this.#area, m, lastSec, cost, this.#takeBack, this.#stillOurs)) {
        this.#retries++;
        continue;
      }
      // A reclaim that judged the key idle before our commit must not complete (see decide).
      if (this.#settle(base, ctrl) !== DONE) return RELOCATE;
      return this.#stamped(ref);
    }
  }

  /**
   * `allow()` from this thread's own latest write (`ref.tat`) instead of a load, for the key's
   * one limit `a` (#own), when the record says the key's stamp reached the second of this
   * thread's latest reading (docs/design.md, section 2, "A thread's own write", which
   * Gcra32.decide follows for a GCRA limit without a cap). Reads the clock; in a new second it
   * returns OWN_GIVEN_UP. Otherwise the limit decides on its own write, and the commit is a
   * compareExchange from it, so what lands is what a load of the word would have decided at this
   * reading; the key is fresh and its stamp needs no raise. A refusal stands only if a load of the
   * word still finds our write (then the plain ctrl read of "Plain reads of ctrl"). A word that
   * moved (another thread wrote the key) ends the attempt with nothing written: OWN_MISSED, and
   * the caller decides again from loads, with a new reading. Never decides again on a state
   * another thread wrote: that takes the loaded stamp (see Clock). A cap is served from this
   * thread's batch, between the decision and the commit, as in #decideBatched (OWN_GIVEN_UP,
   * nothing written, when the batch cannot serve: the caller's path decides on the cap's word).
   * After the commit, #settle as on every path.
   */
  #allowOwn(ref: SlotRef, base: number, ctrl: number, stateBase: number, cost: number, a: NarrowGcra | FixedWindow32): number {
    const m = this.#ownRead();
    if (m === null) return OWN_GIVEN_UP;
    const w = this.#w;
    const at = stateBase + (this.#key.offsets[0] as number);
    const mine = ref.tat;
    a.own(mine);
    if (!a.admits(m, false, cost)) return this.#ownRefused(a, at, mine, base, ctrl, cost);
    if (!this.#ownCap(m, cost)) return OWN_GIVEN_UP;
    const batch = this.#batch;
    this.#ownAdmitted(stateBase);
    // The commit, a compareExchange from our own write (NarrowGcra.commit, FixedWindow32.commit):
    // seq-cst, like every write of a key limit. A miss wrote nothing.
    const landed = a.commit(w, at);
    // A reclaim that judged the key idle before our commit must not complete (see decide).
    const outcome = landed ? this.#settle(base, ctrl) : OWN_MISSED;
    if (outcome === DONE) return this.#stamped(ref);
    batch?.giveBack(cost); // not admitted: the permits stay in this thread's batch
    return outcome;
  }

  /**
   * #allowOwn for a key of two limits of one int32 word each (`limits`): each decides on this
   * thread's own latest write to it (`ref.tat`, `ref.tat2`), in the second of that write, and a
   * refusal stands only if a load of the refusing word still finds the own write. The commits are
   * LimitSet.commit's, as on the load path: a limit whose word moved (another thread wrote the
   * key) is decided again at this reading on a new snapshot of it alone, and the limits before
   * it are taken back only when it now refuses; then OWN_MISSED, and the caller decides again
   * from loads. (Found, when this path took the first limit back whenever the second's
   * compareExchange failed and then decided again: a take-back that found the first word moved
   * on kept the spend, and the admission was counted twice on it: a penalty race on two limits
   * ended one interval over its exact count.) A new snapshot may be newer than the reading,
   * which reads as more spent (see LimitSet.commit). The cap, when there is one, from this
   * thread's batch, as in #allowOwn.
   */
  #allowOwnTwo(ref: SlotRef, base: number, ctrl: number, stateBase: number, cost: number, limits: (NarrowGcra | FixedWindow32)[]): number {
    const m = this.#ownRead();
    if (m === null) return OWN_GIVEN_UP;
    const offsets = this.#key.offsets;
    for (let i = 0; i < 2; i++) {
      const a = limits[i] as NarrowGcra | FixedWindow32;
      const mine = i === 0 ? ref.tat : ref.tat2;
      a.own(mine);
      if (!a.admits(m, false, cost)) return this.#ownRefused(a, stateBase + (offsets[i] as number), mine, base, ctrl, cost);
    }
    if (!this.#ownCap(m, cost)) return OWN_GIVEN_UP;
    const batch = this.#batch;
    this.#ownAdmitted(stateBase);
    // Each a compareExchange from the limit's own write (seq-cst, like every write of a key
    // limit). The stamp is m.sec already (SlotRef.knowsSec): LimitSet.commit's raise does nothing.
    const set = this.#set;
    const lost = set.retries;
    // A limit that lost its race is decided again only while the slot holds our key: the record
    // may be older than a reclaim of the key (found: the new snapshot was the key's next
    // incarnation, in the same slot, and the spend landed there before #settle said RELOCATE,
    // then counted again on the relocated key).
    if (!set.commit(this.#key, this.#area, m, m.sec, cost, this.#takeBack, this.#stillOurs)) {
      batch?.giveBack(cost); // not admitted: the permits stay in this thread's batch
      this.#retries++;
      return OWN_MISSED;
    }
    // A reclaim that judged the key idle before our commits must not complete (see decide).
    const outcome = this.#settle(base, ctrl);
    if (outcome === DONE) {
      // Landed after a lost race: another thread writes this key too, so its next OWN_BACKOFF
      // admissions load (found: without it, two workers on shared keys lost both races on
      // almost every check, 1.76 retries a check against 0.004 on the load path).
      if (set.retries !== lost) ref.ownSkip = OWN_BACKOFF;
      return this.#stamped(ref);
    }
    batch?.giveBack(cost); // the key was reclaimed under us: decide again on its new slot
    return outcome;
  }

  /**
   * The own paths' reading: the moment, or null in a new second (this thread's second moves on,
   * and the caller gives way to loads: SlotRef.knowsSec spoke of the second before). The key is
   * fresh in its own write's second and needs no raise.
   */
  #ownRead(): Moment | null {
    const m = this.#read();
    if (m.sec !== this.#sec) {
      this.#sec = m.sec;
      this.#secHi = secHi(m.sec);
      this.#secLo = secLo(m.sec);
      return null;
    }
    this.#raised = false;
    return m;
  }

  /**
   * An own path's refusal by `a`, decided on this thread's own write `mine` of the word at `at`:
   * DONE (the result filled) only while that word still holds it; OWN_MISSED when another thread
   * wrote it since, RELOCATE when the slot no longer holds the key.
   */
  #ownRefused(a: NarrowGcra | FixedWindow32, at: number, mine: number, base: number, ctrl: number, cost: number): number {
    const w = this.#w;
    // Atomics.load (seq-cst) of the refusing word, then the plain ctrl read after it, as Gcra32.decide's refusal.
    if (Atomics.load(w, at) !== mine) return OWN_MISSED;
    if (w[base + S_CTRL] !== ctrl) return RELOCATE;
    const r = this.result;
    r.allowed = false;
    r.refusedBy = 'key';
    r.never = cost > a.capacity;
    r.retryAfterMs = r.never ? Infinity : 0;
    return DONE;
  }

  /** An own path's admission, before its commits: the result, and the key's give-back epoch as #readEpoch reads it. */
  #ownAdmitted(stateBase: number): void {
    const r = this.result;
    r.allowed = true;
    r.refusedBy = null;
    r.never = false;
    r.retryAfterMs = 0;
    this.#area.epoch = this.#w[stateBase + this.#epochOffset] as number;
  }

  /**
   * The own paths' cap: true when there is none, or when this thread's batch served `cost` at
   * `m` (given back by the caller if the admission does not land); false, nothing taken, when
   * the batch cannot serve (the caller's path then decides on the cap's word).
   */
  #ownCap(m: Moment, cost: number): boolean {
    const batch = this.#batch;
    return batch === null || batch.take(m.ms, cost, this.#clock) === TAKEN;
  }

  /**
   * `allow()` under a busy global cap: the key's limits as in `decide`, the cap from this
   * thread's batch (global-batch.ts). DONE, RELOCATE, or FALLBACK_EXACT when the batch cannot
   * serve (nothing was written).
   */
  #decideBatched(ref: SlotRef, cost: number, batch: GlobalBatch): number {
    const base = ref.base;
    const ctrl = ref.ctrl;
    const set = this.#set;
    const r = this.result;
    const key = this.#key;
    const area = this.#area;
    for (;;) {
      set.loadStates(key, area);
      const lastSec = this.#stampThenRead(ref);
      const m = this.#moment;
      // ctrl after the snapshot, as in decide.
      if (this.#ctrlAt(base) !== ctrl) return RELOCATE;
      set.check(key, m, lastSec, cost);
      r.refusedBy = r.allowed ? null : 'key';
      if (!r.allowed || cost === 0) return DONE;
      if (batch.take(m.ms, cost, this.#clock) !== TAKEN) return FALLBACK_EXACT;
      this.#readEpoch(area.state);
      if (!set.commit(key, area, m, lastSec, cost, this.#takeBack, this.#stillOurs)) {
        batch.giveBack(cost); // not admitted: the permits stay in this thread's batch
        this.#retries++;
        continue;
      }
      if (this.#settle(base, ctrl) === DONE) return this.#stamped(ref);
      batch.giveBack(cost); // the key was reclaimed under us: decide again on its new slot
      return RELOCATE;
    }
  }

  /** Whether every limit (and the cap) can hold a reservation (every lock-free algorithm can). */
  get canReserve(): boolean {
    return this.#key.algorithms.every((a) => a.reserve !== undefined) && (this.#global?.algorithms.every((a) => a.reserve !== undefined) ?? true);
  }

  /**
   * Like `decide`, but a request that must wait up to `maxWaitMs` is counted now and
   * `result.retryAfterMs` is its wait; `slots` then receives where each limit's slot starts
   * (key limits, then the cap's), for `refund`.
   */
  reserve(ref: SlotRef, stateBase: number, cost: number, maxWaitMs: number, slots: Int32Array): number {
    this.#set.reserving = maxWaitMs;
    // The slot's reset mark before the decision, for the cancel (`refund`; table/reset-marks.ts).
    this.reservedMark = resetMark(this.#w, ref.base);
    try {
      const outcome = this.decide(ref, stateBase, cost);
      if (outcome === DONE && this.result.allowed && cost > 0) {
        let i = 0;
        for (const g of this.#global === null ? [this.#key] : [this.#key, this.#global]) {
          for (const a of g.algorithms) (a.slotStart as NonNullable<LimitAlgorithm['slotStart']>)(slots.subarray(i, (i += 2)));
        }
      }
      return outcome;
    } finally {
      this.#set.reserving = null;
    }
  }

  /** The reset mark of the key's slot that the latest `reserve` read before its decision, for its `refund`. */
  reservedMark = 0;

  /**
   * Gives back what is still ahead of now of a reservation's slots (see `reserve`), on every
   * limit; false when the key's slot was reused or nothing was ahead. `mark`: the slot's reset
   * mark its reservation read (`reservedMark`): after a reset or a block of the key
   * (table/reset-marks.ts), its key limits give nothing back (the cap still does: a key's reset
   * or block leaves the cap's state alone).
   */
  refund(base: number, ctrl: number, stateBase: number, cost: number, slots: Int32Array, mark: number): boolean {
    // A give-back: under the key's guard, the epoch moved on after it (see giveBack). A reset
    // holds the guard too, so none runs between the key limits' checks of the mark and their
    // compareExchanges; a block does not, and is checked after each limit's snapshot.
    return this.#givingBack(base, ctrl, stateBase, false, () => this.#refund(base, ctrl, stateBase, cost, slots, mark));
  }

  #refund(base: number, ctrl: number, stateBase: number, cost: number, slots: Int32Array, mark: number): boolean {
    const w = this.#w;
    const m = this.#read();
    const forgotten = (): boolean => resetSince(w, base, mark);
    let any = false;
    let i = 0;
    const groups: [LimitGroup, number][] = [[this.#key, stateBase]];
    if (this.#global !== null) groups.push([this.#global, (this.#globalArea as StateArea).state]);
    for (const [g, state] of groups) {
      for (let j = 0; j < g.algorithms.length; j++, i += 2) {
        // ctrl before each refund: the key still owns its slot (the global cap always exists).
        if (g === this.#key && Atomics.load(w, base + S_CTRL) !== ctrl) return any;
        const a = g.algorithms[j] as LimitAlgorithm;
        // On a cap served in batches, only an exact refund is safe (see NarrowGcra.refund).
        const exact = g !== this.#key && this.#batch !== null;
        if ((a.refund as NonNullable<LimitAlgorithm['refund']>)(
          w, state + (g.offsets[j] as number), m, slots[i] as number, slots[i + 1] as number, cost, exact, g === this.#key ? forgotten : null,
        )) {
          any = true;
        }
      }
    }
    return any;
  }

  /**
   * Before a decision's first commit on the key: the key's give-back epoch, for #undoKey. A plain
   * read: it comes before our commit's compareExchange, so a give-back that read our commit (and
   * only such a one can take our spend) adds to the epoch after this read; a stale value only
   * makes #undoKey keep the spends.
   */
  #readEpoch(stateBase: number): void {
    this.#area.epoch = this.#w[stateBase + this.#epochOffset] as number;
  }

  /**
   * Takes back the first `n` key commits of the decision on the slot at #base (a later limit, or
   * the cap, refused): false if the key no longer owns the slot (the spends went with it). It holds
   * the guard meanwhile and keeps the spends (conservative) when another holder has the guard or
   * a give-back ended since #readEpoch (give-back-guard.ts); it never waits.
   */
  #undoKey(n: number): boolean {
    const w = this.#w;
    const base = this.#base;
    const ctrl = this.#ctrl;
    if (n === 0) return true; // nothing committed on the key
    const token = hold(w, base, ctrl, this.#owner, this.#takeOverMs, false);
    if (token === GONE) return false;
    if (token === BUSY) return true;
    // Atomics.load of the epoch after taking the guard: a give-back adds to it before it lets the
    // guard go, and our compareExchange read that release (or a later word).
    if (Atomics.load(w, this.#area.state + this.#epochOffset) === this.#area.epoch) this.#set.undo(this.#key, this.#area, n);
    release(w, base, freeGuard(ctrl), token);
    return true;
  }

  /**
   * After the commits: DONE if they stand, RELOCATE if the key was reclaimed (or its slot reused)
   * by a reclaim that may not have seen them.
   */
  #settle(base: number, ctrl: number): number {
    const w = this.#w;
    const free = freeGuard(ctrl);
    for (;;) {
      // Atomics.load of the guard after our commits (seq-cst): a reclaim that starts after this
      // load writes its token first and reads the states after, so it sees our spend. The free
      // value names the incarnation, so one load also tells that the slot still holds our key.
      const guard = Atomics.load(w, base + S_TAT);
      if (guard === free) return DONE;
      if (guard === DEAD) return RELOCATE;
      // Another value: ours to act on only if ctrl is still ours (neither a token nor a stray
      // value names an incarnation; the slot's next key must not get our free value).
      if (Atomics.load(w, base + S_CTRL) !== ctrl) return RELOCATE;
      // A give-back or an undo holds the guard: no reclaim completes while it does (it is not
      // ours to cancel), and one that starts after it lets go reads our commits.
      if (isHolderToken(guard)) return DONE;
      // A token (odd): a reclaim is checking the key and may have read it before our commit.
      // An even value not ours: an inserter of an earlier claim on this slot that stalled past
      // its reuse wrote it late (see REUSE_AFTER_TIMEOUTS in table/insert.ts). Either way, put our free
      // value back with a compareExchange from the exact word seen (a reclaim's own final
      // compareExchange then fails); look again if the word moved meanwhile.
      if (Atomics.compareExchange(w, base + S_TAT, guard, free) !== guard) continue;
      // Atomics.load of ctrl again, now that the guard holds our free value. A reclaimer's token
      // repeats (an owner and a time modulo 2^20 ms): a decision stopped between the ctrl load
      // above and this compareExchange while that reclaim completed (its reads came before our
      // commits), the key came back into the slot, and a reclaimer of the next incarnation wrote
      // the same token, wrote our free value into the next incarnation's guard, and would have
      // kept an admission whose spends went with the reclaimed key (found by a review). Give that
      // word back and decide again on the key's new slot, as give-back-guard.ts's `hold` does.
      // The next incarnation's guard is written after its claim of ctrl, so a compareExchange
      // that read it makes the new ctrl visible to this load.
      if (Atomics.load(w, base + S_CTRL) === ctrl) return DONE;
      Atomics.compareExchange(w, base + S_TAT, free, guard);
      return RELOCATE;
    }
  }

  /**
   * The slot's ctrl word, read after the key's snapshot: plainly when every key state is an int32
   * word (the snapshot's Atomics.load of a value written after a reuse makes the reuse's ctrl
   * visible), else by Atomics.load.
   */
  #ctrlAt(base: number): number {
    return this.#plainCtrl ? (this.#w[base + S_CTRL] as number) : Atomics.load(this.#w, base + S_CTRL);
  }

  /**
   * After the key's states were loaded: Atomics.load of its lastSec, then the clock into
   * `#moment`; returns the lastSec the decision judges by. A state written by a recent admission
   * was stamped first (LimitSet.commit raises lastSec before its compareExchanges), so a stale
   * verdict comes only from states that old; and a stamp loaded before the reading is not later
   * than it. The load is skipped when this thread saw the word reach the second of its latest
   * reading (it only moves forward), as in Gcra32.#spend: a guess, checked after the read; in a
   * new second the word is loaded and the clock read again (docs/design.md, section 2). Sets
   * `#raised`.
   */
  #stampThenRead(ref: SlotRef): number {
    const at = ref.base + S_LAST_SEC;
    // The bound stands for the loaded state only while that state is this thread's own write
    // (its first limit's word as this thread wrote it: see #stamped): a state another thread
    // wrote may come from a later reading than ours if the clock stepped back, and then only the
    // loaded stamp tells (see Clock). Other first limits always load.
    const first = this.#first;
    const guess = first !== null && first.loaded === ref.tat && ref.knowsSec(this.#secHi, this.#secLo);
    let lastSec = guess ? this.#sec : Atomics.load(this.#w, at);
    let m = this.#read();
    if (guess && m.sec !== lastSec) {
      lastSec = Atomics.load(this.#w, at); // a new second: load, then read again
      m = this.#read();
    }
    // A stamp ahead of the reading: the clock stepped back behind a decision on this key. Decide
    // at the start of the stamp's second instead (arithmetic on what was loaded; no load).
    this.#raised = raiseToStamp(m, lastSec);
    if (m.sec !== this.#sec) {
      this.#sec = m.sec;
      this.#secHi = secHi(m.sec);
      this.#secLo = secLo(m.sec);
    }
    return lastSec;
  }

  /**
   * DONE after a commit landed on our key: LimitSet.commit raised its lastSec to the reading's
   * second or later. Keeps that second, and the word this thread wrote to the first limit when
   * it is one int32 word (#stampThenRead and #allowOwn start from it), and to the second on a
   * key #allowOwnTwo takes.
   */
  #stamped(ref: SlotRef): number {
    const sec = this.#moment.sec;
    if (sec === this.#sec) ref.knowSec(this.#secHi, this.#secLo);
    else {
      ref.sec = sec;
      ref.secKnown = true;
    }
    if (this.#first !== null) ref.tat = this.#first.written;
    const two = this.#ownTwo;
    if (two !== null) ref.tat2 = (two[1] as NarrowGcra | FixedWindow32).written;
    return DONE;
  }

  #read(): Moment {
    const m = this.#moment;
    const ms = this.#clock();
    m.ms = ms;
    // Two comparisons instead of secondsAt's division, on all but a second's first reading.
    m.sec = ms >= this.#secFromMs && ms <= this.#secToMs ? this.#readSec : this.#secondOf(ms);
    return m;
  }

  /**
   * `secondsAt(ms)`, kept with the readings it holds for (`sameSecondUntil`). A reading outside
   * them (the next second, or a clock that stepped back) computes it again.
   */
  #secondOf(ms: number): number {
    const sec = secondsAt(ms);
    this.#readSec = sec;
    this.#secFromMs = ms;
    this.#secToMs = sameSecondUntil(ms, sec);
    return sec;
  }
}

/**
 * Where a decision counted its spend (slot and ctrl), the give-back epoch it read first, and the
 * reading it was decided at (`spendMark`).
 */
export interface SpendMark {
  readonly base: number;
  readonly ctrl: number;
  readonly epoch: number;
  readonly ms: number;
}

/** Whether any limit of `g` decided, in its last check or force, a later window than the reading's. */
function decidedLater(g: LimitGroup): boolean {
  for (const a of g.algorithms) if ((a as LimitAlgorithm).decidedLater?.() === true) return true;
  return false;
}
