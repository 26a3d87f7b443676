import { NodeGroups, type Breaker, type NodeGroup } from './breaker.js';
import { configError, RedisConfigError } from './redis-errors.js';
import type { RedisCommands } from './client.js';
import {
  ALLOWED, ALLOWED_PLAIN, ALONE_DEBT, ALONE_LATE, ALONE_PLAIN, EXCEEDS_BURST, GLOBAL_LIMIT, LATE, LIMITED, type LimitsScript,
} from './limits-script.js';
import { ERROR } from './script-reply.js';
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
  /** The global cap's limits (also in `globalKeys`' order). */
  readonly globalLimits: readonly RedisLimit[];
  /** Every limit is GCRA: a refund names where its spend's slot ended, not when it was spent. */
  readonly gcra: boolean;
  /**
   * Every limit counts whole µs (GCRA with k = 1, or a window): a reply's reset, rounded up to a
   * whole µs, is then exact (a GCRA cap's refund names the slot's end from it).
   */
  readonly wholeUs: boolean;
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
  /** The server the call goes to: its breaker and places in flight. */
  group: NodeGroup;
  cost: number;
  /** A lease: up to this much (>= cost). */
  want: number;
  /**
   * For a refund (cost < 0), µs on Redis's clock: when it was spent (windows), or where its slot
   * ended (GCRA: `ScriptPlan.gcra`).
   */
  refundAt: number;
  /** performance.now() past which the caller gets 'failed'. */
  deadline: number;
  /** Its breaker's token (Breaker.token): the probe's, when this call is the half-open breaker's probe; else 0. */
  probe: number;
  /** Turns the outcome into the caller's answer (run once, when the decision settles). */
  finish: (o: Outcome) => unknown;
  resolve: (answer: unknown) => void;
  reject: (e: unknown) => void;
  settled: boolean;
}

/** `finish` for a caller that wants the outcome itself. */
export const outcome = (o: Outcome): Outcome => o;

/** Script calls in flight at once (per limiter and server): decisions that arrive meanwhile go out together. */
const MAX_IN_FLIGHT = 4;
/** On a Cluster, per primary: batches are per slot, so more of them may be in flight. */
const MAX_IN_FLIGHT_CLUSTER = 64;
const SLOTS = 16_384;
/** How far two clocks may drift apart, per ms: 100 ppm. */
const DRIFT = 1e-4;
/** Resolved: `#schedule` queues its flush as this promise's reaction. */
const SETTLED = Promise.resolve();

/**
 * `us`, a whole number of µs on Redis's clock (below 2^53), in decimal. String() of a number this
 * large takes V8's general path for doubles, 0.1 us and more; its whole seconds and the µs past
 * them are small integers, which convert at a fraction of that (one call at a time, the deadline's
 * conversion was 1.5% of the client's time per call).
 */
function usText(us: number): string {
  if (!(us >= 1e6) || !Number.isInteger(us)) return String(us);
  // % is exact on doubles, and so is the division of the multiple of 1e6 it leaves.
  const rest = us % 1e6;
  return String((us - rest) / 1e6) + String(rest).padStart(6, '0');
}

/** A script's reply (limits-script.ts): integers, which a client may hand over as strings. */
type Answer = readonly (number | string)[];

/**
 * A script reply that is not what the script returns (another script under its SHA, a proxy or
 * client that rewrote it): an error of the call, which the batcher handles as a failure (the
 * breaker counts it, the decision answers by onError), never an admission.
 */
export class MalformedReplyError extends Error {
  constructor(why: string, reply: unknown) {
    let shown: string;
    try {
      shown = JSON.stringify(reply)?.slice(0, 200) ?? String(reply);
    } catch {
      shown = String(reply);
    }
    super(`the Redis script's reply is malformed (${why}): ${shown}`);
    this.name = 'MalformedReplyError';
  }
}

/**
 * Checks that `reply` is an array of integers (numbers, or the decimal strings some clients
 * give), long enough for the plan's tail (Redis's time, and the cap's block with a cap); throws
 * MalformedReplyError.
 */
function checkShape(reply: unknown, plan: ScriptPlan): Answer {
  if (!Array.isArray(reply)) throw new MalformedReplyError('not an array', reply);
  for (const x of reply as unknown[]) {
    if (!(typeof x === 'number' || typeof x === 'string') || !Number.isSafeInteger(Number(x)) || x === '') {
      throw new MalformedReplyError('an element is not an integer', reply);
    }
  }
  if (reply.length < (plan.globalKeys.length > 0 ? 2 : 1)) throw new MalformedReplyError('too short', reply);
  return reply as Answer;
}

/** Checks a decision's status word at `at` of a batch's `reply`: one the scripts write (ERROR: a batch's only). */
function checkStatus(reply: Answer, at: number): number {
  const status = Number(reply[at]);
  if (!(status >= ALLOWED && status <= ERROR)) throw new MalformedReplyError(`unknown status ${String(reply[at])}`, reply);
  return status;
}

/**
 * A decision of a batch that raised an error in the script (script-reply.ts, LUA_DECISIONS_OPEN):
 * it wrote nothing, and the batch's other decisions were answered. `message`: the error as Lua
 * caught it ("WRONGTYPE ...", a Lua runtime error's "user_script:12: ...", or on Redis 6 the
 * scripting layer's "@user_script: 1: -OOM ..."), classified by configError (redis-errors.ts).
 */
export class DecisionError {
  constructor(readonly message: string) {}
}

/** An element that leads a batch's reply: an error's message (a string that is not an integer), as text; else null. */
function messageOf(x: unknown): string | null {
  const text = typeof x === 'string' ? x : x instanceof Uint8Array ? Buffer.from(x).toString() : null;
  if (text === null || (text !== '' && Number.isSafeInteger(Number(text)))) return null;
  return text;
}

/** The reply's tail: the cap's block after the batch (0 without a cap) and Redis's time. */
function tail(reply: Answer, plan: ScriptPlan): { capBlockedUs: number; nowUs: number; end: number } {
  const capped = plan.globalKeys.length > 0;
  const end = reply.length - (capped ? 2 : 1);
  const capBlockedUs = capped ? Number(reply[end]) : 0;
  if (capBlockedUs < 0) throw new MalformedReplyError("a negative block of the cap's", reply);
  return { capBlockedUs, nowUs: Number(reply[end + (capped ? 1 : 0)]), end };
}

/**
 * The least Redis time (µs) a reply may carry, but under the tests' time: 2001-09-09. Redis's TIME
 * is the Unix time; a reply whose last integer is smaller is not the script's (TIME's own reply
 * read as one, say).
 */
export const MIN_REDIS_TIME_US = 1e15;

/**
 * Checks a decision's six fields at `at` (a decision of `cost`) for what the scripts guarantee:
 * a decided status (LATE and ALLOWED_PLAIN have forms of their own); remaining, reset and the
 * block never negative; an admission waits 0, a request over the burst -1 (never), any other
 * refusal 0 or more (-1 too for the cap's, which may be over its burst); a refusal grants
 * nothing, and an admission its cost or more (a lease), or nothing (a probe, a refund, a control).
 */
function checkFields(reply: Answer, at: number, cost: number): void {
  const status = Number(reply[at]);
  const wait = Number(reply[at + 2]);
  const granted = Number(reply[at + 5]);
  let why: string | null = null;
  if (status !== ALLOWED && status !== LIMITED && status !== EXCEEDS_BURST && status !== GLOBAL_LIMIT) why = `status ${status} in a decision's six fields`;
  else if (Number(reply[at + 1]) < 0) why = 'a negative remaining';
  else if (Number(reply[at + 3]) < 0) why = 'a negative reset';
  else if (Number(reply[at + 4]) < 0) why = 'a negative block';
  else if (status === ALLOWED ? wait !== 0 : status === EXCEEDS_BURST ? wait !== -1 : wait < (status === GLOBAL_LIMIT ? -1 : 0)) {
    why = `status ${status} with a wait of ${wait}`;
  } else if (status === ALLOWED ? granted !== 0 && !(cost > 0 && granted >= cost) : granted !== 0) {
    why = `status ${status} granting ${granted} of a cost of ${cost}`;
  }
  if (why !== null) throw new MalformedReplyError(why, reply);
}

/** Checks a short admission's remaining and reset at `at` ([remaining, reset]): neither negative. */
function checkPlain(reply: Answer, at: number): void {
  if (Number(reply[at]) < 0 || Number(reply[at + 1]) < 0) throw new MalformedReplyError('a negative remaining or reset', reply);
}

/** The six fields of a decision from `at`: [status, remaining, wait, reset, blocked, granted]. */
function fields(reply: Answer, at: number, capBlockedUs: number, nowUs: number): Reply {
  return {
    status: Number(reply[at]),
    remaining: Number(reply[at + 1]),
    waitUs: Number(reply[at + 2]),
    resetUs: Number(reply[at + 3]),
    blockedUs: Number(reply[at + 4]),
    granted: Number(reply[at + 5]),
    capBlockedUs,
    nowUs,
  };
}

/**
 * The outcomes of a batch script's reply, for decisions of `costs` in order: a DecisionError for
 * each decision that raised an error in the script, with the next of the messages that lead the
 * reply (limits-script.ts); each message must go to one.
 */
export function batchOutcomes(answer: unknown, plan: ScriptPlan, costs: readonly number[]): (Outcome | DecisionError)[] {
  const messages: string[] = [];
  if (Array.isArray(answer)) {
    for (const x of answer as unknown[]) {
      const m = messageOf(x);
      if (m === null) break;
      messages.push(m);
    }
  }
  const reply = checkShape(messages.length > 0 ? (answer as unknown[]).slice(messages.length) : answer, plan);
  const { capBlockedUs, nowUs, end } = tail(reply, plan);
  const out: (Outcome | DecisionError)[] = [];
  let at = 0;
  let told = 0;
  for (const cost of costs) {
    if (at >= end) throw new MalformedReplyError(`${costs.length} decisions asked, fewer answered`, reply);
    const status = checkStatus(reply, at);
    if (status === ERROR) {
      const message = messages[told++];
      if (message === undefined) throw new MalformedReplyError('a decision that failed, without its message', answer);
      out.push(new DecisionError(message));
      at += 1;
    } else if (status === LATE) {
      out.push('late');
      at += 1;
    } else if (status === ALLOWED_PLAIN) {
      checkPlain(reply, at + 1);
      out.push({
        status: ALLOWED, remaining: Number(reply[at + 1]), waitUs: 0, resetUs: Number(reply[at + 2]), blockedUs: 0, granted: cost, capBlockedUs, nowUs,
      });
      at += 3;
    } else {
      if (at + 6 > end) throw new MalformedReplyError(`${costs.length} decisions asked, fewer answered`, reply);
      checkFields(reply, at, cost);
      out.push(fields(reply, at, capBlockedUs, nowUs));
      at += 6;
    }
  }
  if (at !== end) throw new MalformedReplyError(`its length does not match the ${costs.length} decisions asked`, reply);
  if (told !== messages.length) throw new MalformedReplyError(`${messages.length} messages for ${told} decisions that failed`, answer);
  return out;
}

/** Whether `plan`'s script for one decision answers a plain admission with its debt (lua-gcra.ts: one GCRA key limit, no cap). */
function debtForm(plan: ScriptPlan): boolean {
  return plan.gcra && plan.keyLimits.length === 1 && plan.globalKeys.length === 0;
}

/**
 * The outcome of a decision of `cost` alone, from the reply of its plan's script for one: its
 * part is told apart by its length (script-reply.ts, luaReturnDecision), and only the forms that
 * plan's script writes are read, with the values it guarantees (found: read by length alone,
 * [0, 0], [1, 2, 3] or TIME's reply were admissions, and `remaining: -5` came out): none (late);
 * for an admission of exactly its cost (a refund's never is), [debt] under a plan of one GCRA
 * key limit and no cap, with 0 <= debt <= tau - T (the key stays open), else [remaining, reset],
 * neither negative; or the six fields (checkFields). Anything else throws MalformedReplyError.
 */
export function aloneOutcome(answer: unknown, plan: ScriptPlan, cost: number): Outcome {
  const reply = checkShape(answer, plan);
  const { capBlockedUs, nowUs, end } = tail(reply, plan);
  const debt = debtForm(plan);
  const short = cost < 0 ? null : debt ? ALONE_DEBT : ALONE_PLAIN;
  if (end !== ALONE_LATE && end !== short && end !== 6) throw new MalformedReplyError(`a decision of ${end} fields (a cost of ${cost})`, reply);
  switch (end) {
    case ALONE_LATE:
      return 'late';
    case ALONE_DEBT: {
      // The plan's one limit's debt after the admission, in units: remaining and reset as the
      // script works them out (the same operations on the same doubles).
      const [k, T, tau] = (plan.keyLimits[0] as RedisLimit).args;
      const d = Number(reply[0]);
      // Left open (blocked 0): room for one more interval.
      if (!(d >= 0 && d + T <= tau)) throw new MalformedReplyError(`a debt of ${d} units, outside 0 to ${tau - T}`, reply);
      const remaining = Math.floor((tau - d) / T);
      return {
        status: ALLOWED, remaining: remaining < 0 ? 0 : remaining, waitUs: 0, resetUs: k === 1 ? d : Math.ceil(d / k), blockedUs: 0, granted: cost,
        capBlockedUs, nowUs,
      };
    }
    case ALONE_PLAIN:
      checkPlain(reply, 0);
      return { status: ALLOWED, remaining: Number(reply[0]), waitUs: 0, resetUs: Number(reply[1]), blockedUs: 0, granted: cost, capBlockedUs, nowUs };
    default:
      checkFields(reply, 0, cost);
      return fields(reply, 0, capBlockedUs, nowUs);
  }
}

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
  /** The breakers and places in flight, per server (per primary on a Cluster). */
  readonly groups: NodeGroups;
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
  /** Tests only, with fixedNowUs: ms added to every expiry a script writes. */
  fixedTtlPadMs = 0;

  constructor(redis: RedisCommands, timeoutMs: number, maxBatch: number) {
    this.#redis = redis;
    this.timeoutMs = timeoutMs;
    this.groups = new NodeGroups(timeoutMs);
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
   * a lease (a negative cost refunds -cost of the spend `refundAt` names, see Pending). Resolves
   * with what `finish` makes of Redis's reply, 'late' or 'failed' (`outcome`: the outcome itself), and rejects only when
   * `finish` throws. `deadline` (performance.now() basis) is at most now + timeoutMs. `finish`
   * runs as the decision settles: one promise per decision, not a chain of them. A caller whose
   * `breakerFor(...).pass()` let a probe through calls this at once, in the same tick: the call
   * takes the probe's token, so that its outcome settles the probe.
   */
  decide<T>(plan: ScriptPlan, base: string, cost: number, want: number, refundAt: number, deadline: number, finish: (o: Outcome) => T): Promise<T> {
    const slot = this.#slotOf(plan, base);
    const group = this.groups.of(this.#redis.nodeOf(slot));
    return new Promise<T>((resolve, reject) => {
      const p: Pending = {
        plan, base, slot, group, cost, want, refundAt, deadline, probe: group.breaker.token(), finish, resolve: resolve as (answer: unknown) => void, reject,
        settled: false,
      };
      this.#watch(p);
      this.#queue.push(p);
      this.#schedule();
    });
  }

  /** The slot a decision's call goes to (0 on a standalone server). */
  #slotOf(plan: ScriptPlan, base: string): number {
    return this.#redis.cluster ? this.#redis.slotOf(plan.suffixes.length > 0 ? base + (plan.suffixes[0] as string) : (plan.globalKeys[0] as string)) : 0;
  }

  /**
   * The breaker of the server a decision on `base` under `plan` goes to: the one a caller asks
   * (`pass`) before it calls `decide` for it.
   */
  breakerFor(plan: ScriptPlan, base: string): Breaker {
    return this.groups.of(this.#redis.nodeOf(this.#slotOf(plan, base))).breaker;
  }

  /** Sends what waits once the current tick is over, so that decisions made together share a call. */
  #schedule(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    // A settled promise's reaction is a microtask like queueMicrotask's, without the async
    // context Node wraps each of those in (0.1 us of a decision's 1.4 us of JS one at a time).
    void SETTLED.then(this.#scheduled);
  }

  readonly #scheduled = (): void => {
    this.#flushScheduled = false;
    this.#flush();
  };

  #flush(): void {
    for (;;) {
      const head = this.#nextHead();
      if (head === undefined) return;
      // What waits, spread over the calls that may still go out to that server: several smaller
      // calls let Redis run one while this thread reads the answer to another, where one large
      // call would make them take turns (16 callers: 0.5x RateLimiterRedis in one call a round).
      const g = head.group;
      const batch = this.#take(head, Math.min(this.#maxBatch, Math.ceil(this.#queue.length / (this.#maxInFlight - g.inFlight))));
      g.inFlight++;
      void this.#send(batch);
    }
  }

  /**
   * The first waiting decision whose server has a place for a call, or undefined. Each server
   * has its own places: calls a failed server holds until their deadlines keep no other
   * server's decisions waiting (they would time out, and count against a server that is fine).
   */
  #nextHead(): Pending | undefined {
    const q = this.#queue;
    let i = 0;
    while (i < q.length && (q[i] as Pending).settled) i++;
    if (i > 0) q.splice(0, i);
    for (const p of q) if (!p.settled && p.group.inFlight < this.#maxInFlight) return p;
    return undefined;
  }

  /** The next batch: `head` and up to `size - 1` more waiting decisions of its plan and slot, in order. */
  #take(head: Pending, size: number): Pending[] {
    // What waits before `head` goes to other slots (a decision of head's slot would have been
    // the head): it stays, in order.
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    for (const p of this.#queue) {
      if (p.settled) continue;
      if (batch.length < size && p.plan === head.plan && p.slot === head.slot) batch.push(p);
      else rest.push(p);
    }
    this.#queue = rest;
    return batch;
  }

  /**
   * Sends one script call for `batch` and settles each of its decisions, then frees the call's
   * place in flight. Never rejects: a failure settles the batch 'failed'.
   */
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
      const packed: (number | string)[] = [batch.length];
      for (const p of batch) {
        for (const s of plan.suffixes) keys.push(p.base + s);
        // The deadline on Redis's clock: ours plus a lower bound of the clocks' offset, in whole
        // µs rounded down, so never later than the moment we give up. None under a fixed time.
        const offset = stored - Math.max(0, p.deadline - learnt) * DRIFT;
        packed.push(p.cost, p.cost < 0 ? usText(p.refundAt) : fixed !== null ? 0 : usText(Math.floor((p.deadline + offset) * 1000)), p.want);
      }
      for (const k of plan.globalKeys) keys.push(k);
      // A decision alone goes to the plan's script for one, when it has one: its fields as they are.
      const single = batch.length === 1 ? plan.script.single : null;
      const script = single ?? plan.script;
      const args: (string | number)[] = single !== null ? packed.slice(1) : [packed.join(',')];
      if (fixed !== null) args.push(fixed(), this.fixedTtlPadMs);
      const sentAt = performance.now();
      const reply = await this.#redis.evalScript(script.sha, script.text, keys, args);
      const received = performance.now();
      // Read (and checked) before anything trusts it: a malformed reply throws, a failure.
      const outcomes = single !== null ? [aloneOutcome(reply, plan, head.cost)] : batchOutcomes(reply, plan, batch.map((p) => p.cost));
      if (fixed === null) {
        const nowUs = Number((reply as Answer)[(reply as Answer).length - 1]);
        if (!(nowUs >= MIN_REDIS_TIME_US)) throw new MalformedReplyError(`Redis's time ${nowUs} µs is before 2001`, reply);
        this.#learn(head.slot, nowUs, sentAt, received);
      }
      // A decision that raised an error in the script failed alone (LUA_DECISIONS_OPEN): a
      // misconfiguration of its key (WRONGTYPE) rejects its caller; an outage (READONLY during a
      // failover) is its 'failed', and counts against the breaker as a failed call does. The
      // other decisions are answered as Redis applied them.
      let outage = false;
      let probe = 0;
      const answers = outcomes.map((o, i): Outcome | RedisConfigError => {
        if (!(o instanceof DecisionError)) return o;
        const config = configError(o.message);
        if (config !== undefined) return config;
        outage = true;
        const p = batch[i] as Pending;
        if (p.probe !== 0) probe = p.probe;
        return 'failed';
      });
      if (outage) head.group.breaker.failed(performance.now(), probe);
      else head.group.breaker.succeeded();
      batch.forEach((p, i) => {
        const a = answers[i] as Outcome | RedisConfigError;
        if (a instanceof RedisConfigError) this.#reject(p, a);
        else this.#settle(p, a);
      });
    } catch (e) {
      const config = configError(e);
      if (config !== undefined) {
        // Not an outage (redis-errors.ts): every caller of the call gets the error. Redis did
        // answer, so the breaker, which counts outages, closes (a half-open probe settles).
        head.group.breaker.succeeded();
        for (const p of batch) this.#reject(p, config);
      } else {
        // The breaker's probe, if it is in the batch (one call of the batch holds its token).
        let probe = 0;
        for (const p of batch) if (p.probe !== 0) probe = p.probe;
        head.group.breaker.failed(performance.now(), probe);
        for (const p of batch) this.#settle(p, 'failed');
      }
    }
    this.#release();
    // The call's place is free. What waits goes out once the callers just answered have run, so
    // that the decisions they make next can join it.
    head.group.inFlight--;
    this.#schedule();
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
        p.group.breaker.failed(now, p.probe);
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

  /** Rejects `p`'s caller with `e` (a misconfiguration), unless it is settled. */
  #reject(p: Pending, e: unknown): void {
    if (p.settled) return;
    p.settled = true;
    p.reject(e);
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
