import { Breaker } from './breaker.js';
import type { RedisCommands } from './client.js';
import { ALLOWED, ALLOWED_PLAIN, LATE, type LimitsScript } from './limits-script.js';
import type { RedisLimit } from './redis-limits.js';

/**
 * What one script call decides over: the limits of a key (and of the global cap, when it lives
 * on the same server), compiled once per rule.
 */
export interface ScriptPlan {
  readonly keyLimits: readonly RedisLimit[];
  /** Each key limit's Redis key, after the key's base (`prefix{tag}:`). */
  readonly suffixes: readonly string[];
  readonly globalKeys: readonly string[];
  /** The script for these limits' algorithms. */
  readonly script: LimitsScript;
}

/** Redis's answer to one decision. */
export interface Reply {
  status: number;
  remaining: number;
  /** -1: never. */
  waitUs: number;
  resetUs: number;
  /** How long no request of cost >= 1 on the key can pass (0: one could now). */
  blockedUs: number;
  /** What Redis counted: the cost, or a lease's grant. */
  granted: number;
  /** The same for the global cap, after the call's whole batch. */
  capBlockedUs: number;
  /** Redis's clock when it decided. */
  nowUs: number;
}

/**
 * A decision Redis did not make: 'late' (it arrived after its deadline and spent nothing) or
 * 'failed' (an error, or no answer by the deadline: whether Redis spent is unknown).
 */
export type Outcome = Reply | 'late' | 'failed';

interface Pending {
  plan: ScriptPlan;
  /** The key's Redis key base; each limit's key is base + suffix. */
  base: string;
  slot: number;
  cost: number;
  /** A lease: up to this much (>= cost). */
  want: number;
  /** For a refund (cost < 0): when it was spent, µs on Redis's clock. */
  spentAt: number;
  /** performance.now() past which the caller gets 'failed'. */
  deadline: number;
  /** Turns the outcome into the caller's answer (run once, when the decision settles). */
  finish: (o: Outcome) => unknown;
  resolve: (answer: unknown) => void;
  reject: (e: unknown) => void;
  settled: boolean;
}

/** `finish` for a caller that wants the outcome itself. */
export const outcome = (o: Outcome): Outcome => o;

/** Script calls in flight at once (per limiter): decisions that arrive meanwhile go out together. */
const MAX_IN_FLIGHT = 4;
/** On a Cluster, batches are per slot, so more of them may be in flight. */
const MAX_IN_FLIGHT_CLUSTER = 64;
const SLOTS = 16_384;
/** How far two clocks may drift apart, per ms: 100 ppm. */
const DRIFT = 1e-4;

/**
 * Sends decisions to Redis: decisions waiting together share script calls (per plan and, on a
 * Cluster, per slot), every decision has its own deadline (one timer for all, in arrival order),
 * and the script is told the same deadline on Redis's clock, never later than the moment the
 * batcher gives up: the reading of Redis's clock is a lower bound from the last reply (TIME is
 * read before the reply arrives). A Cluster keeps that bound per slot: each node has its own
 * clock.
 *
 * Thread-safety: one instance per thread (it holds its queue); the state is Redis's.
 */
export class ScriptBatcher {
  readonly breaker = new Breaker();
  readonly #redis: RedisCommands;
  readonly timeoutMs: number;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  #queue: Pending[] = [];
  /**
   * Every unanswered decision in arrival order, which is deadline order (each gets timeoutMs):
   * one timer, for the first of them, gives up on each in turn.
   */
  readonly #waiting: (Pending | null)[] = [];
  #waitingHead = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;
  /** The deadline the timer is armed for. */
  #timerAt = 0;
  #inFlight = 0;
  #flushScheduled = false;
  /**
   * Redis's clock minus performance.now(), in ms, a lower bound per slot (NaN: not known yet),
   * and when it was last raised (see #learn).
   */
  readonly #offsets: Float64Array;
  readonly #learntAt: Float64Array;
  readonly #learning = new Map<number, Promise<void>>();
  /** Tests only: the time every script call decides at, in µs on Redis's clock. */
  fixedNowUs: (() => number) | null = null;

  constructor(redis: RedisCommands, timeoutMs: number, maxBatch: number) {
    this.#redis = redis;
    this.timeoutMs = timeoutMs;
    this.#maxBatch = maxBatch;
    this.#maxInFlight = redis.cluster ? MAX_IN_FLIGHT_CLUSTER : MAX_IN_FLIGHT;
    this.#offsets = new Float64Array(redis.cluster ? SLOTS : 1).fill(NaN);
    this.#learntAt = new Float64Array(redis.cluster ? SLOTS : 1);
  }

  get cluster(): boolean {
    return this.#redis.cluster;
  }

  /**
   * Decides `cost` for the key whose Redis keys start with `base` under `plan`: up to `want` for
   * a lease (a negative cost refunds -cost spent at `spentAt`). Resolves with what `finish` makes
   * of Redis's reply, 'late' or 'failed' (`outcome`: the outcome itself), and rejects only when
   * `finish` throws. `deadline` (performance.now() basis) is at most now + timeoutMs. `finish`
   * runs as the decision settles: one promise per decision, not a chain of them.
   */
  decide<T>(plan: ScriptPlan, base: string, cost: number, want: number, spentAt: number, deadline: number, finish: (o: Outcome) => T): Promise<T> {
    const slot = this.#redis.cluster ? this.#redis.slotOf(plan.suffixes.length > 0 ? base + (plan.suffixes[0] as string) : (plan.globalKeys[0] as string)) : 0;
    return new Promise<T>((resolve, reject) => {
      const p: Pending = { plan, base, slot, cost, want, spentAt, deadline, finish, resolve: resolve as (answer: unknown) => void, reject, settled: false };
      this.#watch(p);
      this.#queue.push(p);
      this.#schedule();
    });
  }

  /** Sends what waits once the current tick is over, so that decisions made together share a call. */
  #schedule(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    queueMicrotask(() => {
      this.#flushScheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      // What waits, spread over the calls that may still go out: several smaller calls let Redis
      // run one while this thread reads the answer to another, where one large call would make
      // them take turns (16 callers: 0.5x RateLimiterRedis in one call a round).
      const batch = this.#take(Math.min(this.#maxBatch, Math.ceil(this.#queue.length / (this.#maxInFlight - this.#inFlight))));
      if (batch.length === 0) continue;
      this.#inFlight++;
      void this.#send(batch).finally(() => {
        this.#inFlight--;
        this.#flush();
      });
    }
  }

  /** The next batch: up to `size` waiting decisions of the first one's plan and slot, in order. */
  #take(size: number): Pending[] {
    const q = this.#queue;
    let i = 0;
    while (i < q.length && (q[i] as Pending).settled) i++;
    if (i === q.length) {
      this.#queue = [];
      return [];
    }
    const head = q[i] as Pending;
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    for (; i < q.length; i++) {
      const p = q[i] as Pending;
      if (p.settled) continue;
      if (batch.length < size && p.plan === head.plan && p.slot === head.slot) batch.push(p);
      else rest.push(p);
    }
    this.#queue = rest;
    return batch;
  }

  async #send(batch: Pending[]): Promise<void> {
    const head = batch[0] as Pending;
    const plan = head.plan;
    const fixed = this.fixedNowUs;
    try {
      if (Number.isNaN(this.#offsets[head.slot] as number) && fixed === null) await this.#learnOffset(head);
      // Each deadline gets the bound relaxed for drift up to that deadline (see #learn).
      const stored = this.#offsets[head.slot] as number;
      const learnt = this.#learntAt[head.slot] as number;
      const keys: string[] = [];
      const packed: number[] = [batch.length];
      for (const p of batch) {
        for (const s of plan.suffixes) keys.push(p.base + s);
        // The deadline on Redis's clock: ours plus a lower bound of the clocks' offset, in whole
        // µs rounded down, so never later than the moment we give up. None under a fixed time.
        const offset = stored - Math.max(0, p.deadline - learnt) * DRIFT;
        packed.push(p.cost, p.cost < 0 ? p.spentAt : fixed !== null ? 0 : Math.floor((p.deadline + offset) * 1000), p.want);
      }
      for (const k of plan.globalKeys) keys.push(k);
      const args = fixed !== null ? [packed.join(','), fixed()] : [packed.join(',')];
      const sentAt = performance.now();
      const reply = (await this.#redis.evalScript(plan.script.sha, plan.script.text, keys, args)) as (number | string)[];
      const received = performance.now();
      const nowUs = Number(reply[reply.length - 1]);
      const capBlockedUs = plan.globalKeys.length > 0 ? Number(reply[reply.length - 2]) : 0;
      if (fixed === null) this.#learn(head.slot, nowUs, sentAt, received);
      this.breaker.succeeded();
      let at = 0;
      for (const p of batch) {
        const status = Number(reply[at]);
        if (status === LATE) {
          at += 1;
          this.#settle(p, 'late');
        } else if (status === ALLOWED_PLAIN) {
          this.#settle(p, { status: ALLOWED, remaining: Number(reply[at + 1]), waitUs: 0, resetUs: Number(reply[at + 2]), blockedUs: 0, granted: p.cost, capBlockedUs, nowUs });
          at += 3;
        } else {
          this.#settle(p, {
            status,
            remaining: Number(reply[at + 1]),
            waitUs: Number(reply[at + 2]),
            resetUs: Number(reply[at + 3]),
            blockedUs: Number(reply[at + 4]),
            granted: Number(reply[at + 5]),
            capBlockedUs,
            nowUs,
          });
          at += 6;
        }
      }
    } catch {
      this.breaker.failed(performance.now());
      for (const p of batch) this.#settle(p, 'failed');
    }
    this.#release();
  }

  /** Reads Redis's clock (the node's, on a Cluster) before the first decision sent there. */
  #learnOffset(head: Pending): Promise<void> {
    let pending = this.#learning.get(head.slot);
    if (pending === undefined) {
      const routing = head.plan.suffixes.length > 0 ? head.base + (head.plan.suffixes[0] as string) : (head.plan.globalKeys[0] as string);
      const sent = performance.now();
      pending = this.#redis.time(routing).then((us) => {
        this.#learn(head.slot, us, sent, performance.now());
      }).finally(() => {
        this.#learning.delete(head.slot);
      });
      this.#learning.set(head.slot, pending);
    }
    return pending;
  }

  /**
   * Gives `p` its deadline. Decisions arrive in deadline order, as each gets timeoutMs; one with
   * an earlier deadline (the second step of a decision) is put in its place.
   */
  #watch(p: Pending): void {
    const w = this.#waiting;
    let i = w.length;
    while (i > this.#waitingHead && (w[i - 1] as Pending).deadline > p.deadline) i--;
    if (i === w.length) w.push(p);
    else w.splice(i, 0, p);
    // The timer is for the first deadline; one armed no later than this one is left alone (it
    // finds the next deadline when it fires), so a decision does not cost a timer of its own.
    if (i === this.#waitingHead && (this.#timer === null || this.#timerAt > p.deadline)) {
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#arm(p.deadline);
    }
  }

  /**
   * Learns from Redis's clock reading `us`, taken between the local readings `sent` and
   * `received`: the true offset lies in [us/1000 - received, us/1000 - sent]. The bound kept is
   * the largest lower bound seen, so one slow reply does not make later deadlines early (and
   * LATE); it is relaxed by 100 ppm of the time since it was last raised (the clocks may drift
   * apart): here, and when a deadline is computed from it, up to that deadline. A reply whose
   * upper bound is below it replaces it (Redis's clock went back).
   */
  #learn(slot: number, us: number, sent: number, received: number): void {
    const lo = us / 1000 - received;
    const hi = us / 1000 - sent;
    const old = (this.#offsets[slot] as number) - (received - (this.#learntAt[slot] as number)) * DRIFT;
    if (Number.isNaN(old) || hi < old || lo >= old) {
      this.#offsets[slot] = lo;
      this.#learntAt[slot] = received;
    }
  }

  /** Arms the timer for `deadline` (performance.now() basis). */
  #arm(deadline: number): void {
    this.#timerAt = deadline;
    this.#timer = setTimeout(() => this.#expire(), Math.max(0, deadline - performance.now()));
    this.#timer.unref(); // answered decisions need not keep the process alive
  }

  /** Gives up on every decision past its deadline; arms the timer for the next one. */
  #expire(): void {
    this.#timer = null;
    const w = this.#waiting;
    const now = performance.now();
    for (let i = this.#waitingHead; i < w.length; i++) {
      const p = w[i] as Pending;
      if (p.deadline > now) break;
      // A call Redis did not answer in time counts against it, sent or not: an unsent one waited
      // behind calls Redis had not answered (a frozen server holds every call in flight).
      if (!p.settled) {
        this.breaker.failed(now);
        this.#settle(p, 'failed');
      }
    }
    this.#release();
    if (this.#waitingHead < w.length) this.#arm((w[this.#waitingHead] as Pending).deadline);
  }

  /**
   * Lets go of the settled decisions at the front of #waiting (most settle in the order they
   * came), so that an answered decision is not kept alive until its deadline: 500 ms of them
   * would outlive the young generation and cost the collector far more than they took to make.
   * The timer stays armed for a deadline that may now be settled; #expire then moves on.
   */
  #release(): void {
    const w = this.#waiting;
    let i = this.#waitingHead;
    while (i < w.length && (w[i] as Pending).settled) w[i++] = null;
    if (i === w.length) {
      w.length = 0;
      i = 0;
    } else if (i > 1024 && i * 2 > w.length) {
      w.splice(0, i);
      i = 0;
    }
    this.#waitingHead = i;
  }

  #settle(p: Pending, o: Outcome): void {
    if (p.settled) return;
    p.settled = true;
    try {
      p.resolve(p.finish(o));
    } catch (e) {
      // Only this caller's answer failed (e.g. onError's local limiter threw): the batch goes on.
      p.reject(e);
    }
  }
}
