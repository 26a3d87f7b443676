// What every schedule is checked against: exact sequential models, and a search for an order of
// the calls that they accept.
//
// A run's calls overlap. It is correct when some order of them (a linearisation) that keeps
// every call after each call whose last access came before its first, with each call judged at
// one of the clock readings it really made, makes the sequential model give the same answers:
// - an admission the model refuses in every such order is an over-admission;
// - a refusal the model admits in every such order is a phantom refusal.
// A call whose clock read behind a reading made before it (the clock stepped back) may refuse,
// or be judged at that later reading: a limiter may refuse until the clock catches up, or clamp.
// With two or three threads of one or two calls each, the orders are few: all are tried.

const SCALE = 2n ** 64n;

/** ms as an exact integer count of 2^-64 ms (every double of at least 2^-12 ms is one). */
export function units(ms) {
  const scaled = ms * 2 ** 64;
  if (!Number.isInteger(scaled)) throw new RangeError(`reading ${ms} is finer than 2^-64 ms`);
  return BigInt(scaled);
}

/**
 * GCRA by virtual scheduling, a state per key: with I = periodMs / permits and tau = burst * I, a
 * request of `cost` at reading r conforms when max(tat, r) + cost * I - r <= tau, and moves tat
 * there. A clock that went back only makes r smaller: the model refuses until it catches up.
 * Units: 2^-64 ms / permits, so I is exact. `keyOf(outcome)` names the state a call spends (one
 * name for every call: a global cap). A refusal within `refusalSlackMs` of conforming counts as
 * justified (the limiter rounds readings down to its tick).
 */
export function gcraModel({ permits, periodMs, burst }, { refusalSlackMs = 0, keyOf = (o) => o.key } = {}) {
  const p = BigInt(permits);
  const interval = BigInt(periodMs) * SCALE;
  const tau = BigInt(burst) * interval;
  const slack = BigInt(Math.ceil(refusalSlackMs * 2 ** 64)) * p;
  return {
    init: () => new Map(),
    judge(state, o, reading) {
      const key = keyOf(o);
      const tat = state.get(key) ?? null;
      const r = units(reading) * p;
      const start = tat === null || tat < r ? r : tat;
      const end = start + BigInt(o.cost) * interval;
      // Per-key controls (o.op): a penalty spends even past the burst; a reward gives back
      // cost intervals, a reset all of them, never below now; a block raises the state to what
      // refuses until its end. Each always takes place.
      if (o.op === 'penalty') return { admit: true, refuses: false, next: new Map(state).set(key, end) };
      // A block: nothing passes until blockMs after the reading; raised to, never lowered.
      if (o.op === 'block') {
        const until = r + units(o.blockMs) * p + tau - interval;
        return { admit: true, refuses: false, next: new Map(state).set(key, tat !== null && tat > until ? tat : until) };
      }
      if (o.op === 'reward' || o.op === 'reset') {
        if (tat === null || tat <= r) return { admit: true, refuses: false, next: state };
        const back = o.op === 'reset' ? tat - r : BigInt(o.cost) * interval;
        return { admit: true, refuses: false, next: new Map(state).set(key, tat - back < r ? r : tat - back) };
      }
      return { admit: end - r <= tau, refuses: end - r > tau - slack, next: new Map(state).set(key, end) };
    },
  };
}

/** Several models spent together (several limits, or a key limit and a global cap). */
export function allOf(...models) {
  return {
    init: () => models.map((m) => m.init()),
    judge(state, o, reading) {
      const js = models.map((m, i) => m.judge(state[i], o, reading));
      return { admit: js.every((j) => j.admit), refuses: js.some((j) => j.refuses), next: js.map((j) => j.next) };
    },
  };
}

/** The calls of a run, flat, with their thread and index. */
export function callsOf(exec) {
  const out = [];
  for (const r of exec.reports) r.calls.forEach((c, i) => out.push({ ...c, thread: r.thread, index: i }));
  return out;
}

/**
 * Searches for a linearisation the model accepts. `outcome(call)` is { key, cost, admitted } for
 * a call that decides (null for one the model ignores); the model's `judge(state, outcome,
 * reading)` says whether it admits, whether a refusal is justified, and its next state. Returns null when one exists, or a
 * message naming what no order explains.
 */
export function linearizable(calls, model, outcome, { since = -Infinity, judgeRefusals = true } = {}) {
  const all = calls.map((c) => ({ c, o: outcome(c) }));
  // Calls the model does not judge (a sweep) still read the clock: placed in the order too, as
  // readings a later call may be judged at (a reclaim's reading is the floor of a key inserted
  // again after it: table/reclaim-floor.ts).
  const items = all.filter((x) => x.o !== null || x.c.readings.length > 0);
  const deciding = items.filter((x) => x.o !== null);
  const n = items.length;
  const before = items.map((a) => items.map((b) => b.c.lastStep < a.c.firstStep && b !== a));
  const placed = new Array(n).fill(false);
  const tried = (admissionsOnly) => {
    const go = (count, state, high) => {
      if (count === n) return true;
      for (let i = 0; i < n; i++) {
        if (placed[i] || before[i].some((b, j) => b && !placed[j])) continue;
        const { c, o } = items[i];
        placed[i] = true;
        const top = Math.max(high, ...c.readings);
        if (o === null) {
          if (go(count + 1, state, top)) { placed[i] = false; return true; }
          placed[i] = false;
          continue;
        }
        // A call that saw the clock behind a reading made before it may refuse until the clock
        // catches up, or judge at that later reading (clamp): both are what a limiter may do.
        const behind = c.readings.some((r, k) => r < Math.max(high, ...c.readings.slice(0, k)));
        for (const r of new Set([...c.readings, ...(behind ? [top] : [])])) {
          if (Number.isNaN(r) || !Number.isFinite(r)) continue;
          if (o.remaining !== undefined) {
            // A probe that reported `remaining` (get): that many pass at this reading and one more
            // does not (a refusal within the model's slack), and it changes nothing.
            const fits = o.remaining === 0 || model.judge(state, { ...o, cost: o.remaining }, r).admit;
            const full = admissionsOnly || model.judge(state, { ...o, cost: o.remaining + 1 }, r).refuses || behind;
            if (fits && full && go(count + 1, state, top)) { placed[i] = false; return true; }
            continue;
          }
          const j = model.judge(state, o, r);
          const ok = o.admitted ? j.admit : admissionsOnly || j.refuses || behind;
          if (ok && go(count + 1, o.admitted ? j.next : state, top)) { placed[i] = false; return true; }
        }
        placed[i] = false;
      }
      return false;
    };
    return go(0, model.init(), since);
  };
  if (tried(!judgeRefusals)) return null;
  const said = (o) => (o.remaining !== undefined ? `remaining ${o.remaining}` : o.admitted ? 'admitted' : 'refused');
  const describe = deciding.map(({ c, o }) => `T${c.thread}.${c.index} ${c.label}(${o.key}, ${o.cost}) -> ${said(o)} at ${c.readings.join('/')} steps ${c.firstStep}-${c.lastStep}`).join('; ');
  if (!tried(true)) return `over-admission: no order of the calls admits what was admitted: ${describe}`;
  return `phantom refusal: no order of the calls refuses what was refused: ${describe}`;
}
