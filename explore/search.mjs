// The searches over a scenario's schedules, and how a schedule is written down.
//
// A schedule is the list of option indices a run took (controller.mjs lists the options at each
// step, "go on as before" first). Written down, it keeps only the steps that did not take option
// 0: "4:1 9:2" is "at step 4 take option 1, at step 9 option 2, else option 0". Runs are
// deterministic, so that string replays the run exactly.
//
// - Depth-first search (CHESS): every schedule with at most `preemptions` preemptions, at most
//   `timeMoves` clock moves and at most `staleReads` stale plain reads (controller.mjs).
//   Stateless: each schedule runs from the scenario's set-up. Iteratively deepened on the sum of
//   the three, so a level's schedules run again in the next (the last level runs each once).
// - PCT: random thread priorities, lowered at `depth - 1` random steps; clock moves at random.
//   Each run is named by its seed.
import { ScheduleAborted } from './controller.mjs';

/** A schedule as a string (see above). */
export function scheduleString(choices) {
  const parts = [];
  choices.forEach((c, step) => { if (c !== 0) parts.push(`${step}:${c}`); });
  return parts.join(' ');
}

/** Replays a schedule string: option `c` at the steps it names, option 0 at every other. */
export class Replay {
  #at = new Map();
  choices = [];

  constructor(schedule) {
    for (const part of schedule.trim().split(/\s+/).filter(Boolean)) {
      const [step, c] = part.split(':').map(Number);
      if (!Number.isInteger(step) || !Number.isInteger(c)) throw new RangeError(`schedule: bad part ${JSON.stringify(part)}`);
      this.#at.set(step, c);
    }
  }

  begin() {
    this.choices = [];
  }

  choose(options, step) {
    const c = this.#at.get(step) ?? 0;
    if (c >= options.length) throw new Error(`schedule: step ${step} has ${options.length} options, not ${c + 1}`);
    this.choices.push(c);
    return c;
  }
}

/** Depth-first search over every schedule within the bounds. */
export class Dfs {
  #stack = [];
  #depth = 0;
  choices = [];

  constructor({ preemptions, timeMoves, staleReads = 0 }) {
    this.preemptions = preemptions;
    this.timeMoves = timeMoves;
    this.staleReads = staleReads;
    // Iterative deepening on the total of the three: every schedule of total 0, then every one up
    // to 1, and so on up to the bounds, so that a bug one preemption and one clock move deep is
    // found early in a search whose budget may end before the last level does.
    this.level = 0;
    this.top = preemptions + timeMoves + staleReads;
  }

  #allowed(after) {
    return after[0] <= this.preemptions && after[1] <= this.timeMoves && after[2] <= this.staleReads && after[0] + after[1] + after[2] <= this.level;
  }

  begin() {
    this.#depth = 0;
    this.choices = [];
  }

  choose(options) {
    const d = this.#depth++;
    if (d < this.#stack.length) {
      const e = this.#stack[d];
      if (e.costs.length !== options.length) throw new Error(`explorer: the run is not deterministic (step ${d}: ${options.length} options, ${e.costs.length} before)`);
      this.choices.push(e.index);
      return e.index;
    }
    const before = d === 0 ? [0, 0, 0] : this.#stack[d - 1].after;
    const costs = options.map((o) => [o.preempt, o.timeMove, o.stale]);
    this.#stack.push({ costs, index: 0, before, after: before.map((b, k) => b + costs[0][k]) });
    this.choices.push(0);
    return 0;
  }

  /** Moves to the next schedule; false when every one within the bounds has run. */
  next() {
    while (this.#stack.length > 0) {
      const top = this.#stack[this.#stack.length - 1];
      for (let j = top.index + 1; j < top.costs.length; j++) {
        const after = top.before.map((b, k) => b + top.costs[j][k]);
        if (this.#allowed(after)) {
          top.index = j;
          top.after = after;
          return true;
        }
      }
      this.#stack.pop();
    }
    if (this.level >= this.top) return false;
    this.level++;
    return true;
  }

  /** Forgets the steps past `depth` (a run cut short there). */
  cut() {
    this.#stack.length = Math.min(this.#stack.length, this.#depth);
  }
}

/** A small seeded generator (mulberry32). */
export function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * PCT (Burckhardt et al.): each thread a random priority; the highest-priority enabled thread
 * moves; at `depth - 1` random steps below `length` the thread that moved last drops below all.
 * At a clock reading the clock moves with probability `moveRate`, to a random move, and a plain
 * read may be stale, up to the same bounds on clock moves and stale reads as the DFS.
 */
export class Pct {
  choices = [];

  constructor({ seed, depth, length, moveRate = 0.25, timeMoves = Infinity, staleReads = Infinity }) {
    this.seed = seed;
    this.depth = depth;
    this.length = length;
    this.moveRate = moveRate;
    this.timeMoves = timeMoves;
    this.staleReads = staleReads;
  }

  begin() {
    const r = random(this.seed);
    this.rand = r;
    this.priority = new Map();
    this.changes = new Set();
    for (let i = 0; i < this.depth - 1; i++) this.changes.add(Math.floor(r() * this.length));
    this.low = 0;
    this.last = -1;
    this.used = [0, 0];
    this.choices = [];
  }

  #priorityOf(t) {
    let p = this.priority.get(t);
    if (p === undefined) this.priority.set(t, (p = 1 + this.rand()));
    return p;
  }

  choose(options, step) {
    if (this.changes.has(step) && this.last >= 0) this.priority.set(this.last, this.low--);
    let best = -1;
    for (const o of options) if (best < 0 || this.#priorityOf(o.thread) > this.#priorityOf(best)) best = o.thread;
    // The thread's options past its first are clock moves or a stale read, within their bounds.
    const mine = options.map((o, i) => ({ o, i })).filter((x) => x.o.thread === best
      && this.used[0] + x.o.timeMove <= this.timeMoves && this.used[1] + x.o.stale <= this.staleReads);
    let pick = mine[0].i;
    if (mine.length > 1 && this.rand() < this.moveRate) pick = mine[1 + Math.floor(this.rand() * (mine.length - 1))].i;
    this.used[0] += options[pick].timeMove;
    this.used[1] += options[pick].stale;
    this.last = best;
    this.choices.push(pick);
    return pick;
  }
}

/**
 * Runs schedules of one scenario under `chooser` until it is spent, the time budget is, or a run
 * breaks an invariant. Returns what was counted and the first violation, with its schedule.
 */
export async function search(explorer, url, scenario, chooser, { budgetMs = Infinity, maxRuns = Infinity, nextRun, maxSteps } = {}) {
  const lib = await import('./lib.mjs').then((m) => m.libraryOf(explorer.lib));
  const started = performance.now();
  const result = { runs: 0, aborted: 0, steps: 0, complete: false, violation: null, ms: 0 };
  for (;;) {
    chooser.begin();
    let exec = null;
    try {
      exec = await explorer.run(url, scenario, chooser, { maxSteps });
    } catch (e) {
      if (!(e instanceof ScheduleAborted)) throw e;
      result.aborted++;
      if (scenario.mayWait !== true) {
        result.violation = { message: `progress: ${e.message}`, schedule: scheduleString(chooser.choices), trace: null };
      }
      chooser.cut?.();
    }
    result.runs++;
    if (exec !== null) {
      result.steps += exec.steps;
      const message = verdict(scenario, exec, lib);
      if (message !== null) result.violation = { message, schedule: scheduleString(chooser.choices), seed: chooser.seed ?? null, exec };
    }
    if (result.violation !== null) break;
    if (!nextRun(chooser)) { result.complete = true; break; }
    if (result.runs >= maxRuns || performance.now() - started > budgetMs) break;
  }
  result.ms = performance.now() - started;
  return result;
}

/** The scenario's own check, after the checks every scenario shares (no thread failed). */
export function verdict(scenario, exec, lib) {
  for (const r of exec.reports) {
    if (r.failure !== null) return `thread ${r.thread} failed: ${r.failure}`;
    for (const c of r.calls) if (c.error !== null && scenario.throws !== true) return `thread ${r.thread} ${c.label} threw: ${c.error}`;
  }
  return scenario.check(exec, lib);
}
