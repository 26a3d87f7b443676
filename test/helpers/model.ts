// Exact models of what each algorithm promises, for replaying the admissions that several threads
// made against one limiter. A model sees only admissions (a refused request changes no state) and
// reports the admissions, or groups of admissions, that the promise rules out.
//
// When was a request judged? A limiter call may read its clock more than once: a new key reads it
// for its fresh state, a commit that lost a race reads it again (only to see how old its reading
// is; it decides again at its first reading), a global cap takes its own reading. So each
// admission carries two readings, `first` and `t` (the last), and the reading it was judged at
// lies between them. Almost every call reads the clock once, and then both are that reading. The
// models below never blame an admission for this uncertainty: each promise is checked in the form
// "a set of admissions whose readings all lie in some span cannot exceed what the span allows",
// which holds for the true readings whenever it holds for the span [least first, greatest last].
//
// Arithmetic is exact: a double in ms is an exact multiple of 2^-64 ms whenever it is at least
// 2^-12 ms, and every period, permit count and burst used here is an integer, so readings, spans,
// emission intervals and windows are all exact BigInts in units of 2^-64 ms (over `permits` for
// GCRA).

/** One admission: its last and first clock readings (ms) in its call, its cost and its key. */
export interface Admission {
  /** The last reading the call took. */
  t: number;
  /** The first reading the call took (equal to `t` for a call that read the clock once). */
  first: number;
  cost: number;
  key: number;
  /**
   * A reservation, at the time it acts (t = first = its actAtMs), not an admission. Its wait is
   * rounded to whole nanoseconds (ceilNs, which may round down by a picosecond) and added to the
   * reading as a double, so an act time less than ACT_SNAP_MS below a window boundary is on the
   * boundary. (A window never lets a reservation act within 2 ns of its end: see latestIn.)
   */
  reserved?: boolean;
}

/** How far below a window boundary a reservation's act time still counts as on it (1 ns). */
const ACT_SNAP_MS = 1e-6;

/** The time a window model places an admission's or a reservation's act at (see `reserved`). */
function actMs(ms: number, reserved: boolean | undefined): number {
  return reserved === true ? ms + ACT_SNAP_MS : ms;
}

/** What a replay found. */
export interface ModelReport {
  /** Admissions (or, for windows, groups of them) that the model rules out. */
  violations: number;
  /** Admissions replayed. */
  admissions: number;
  /** Total cost replayed. */
  spent: number;
  /** A few violations, for the failure message. */
  examples: string[];
  /**
   * The closest call: GCRA, the largest `tat' - t - tau` in ms (<= 0 is within the promise);
   * windows, the largest count minus what is allowed (<= 0 is within); sliding log, the largest
   * count of requests within less than a period minus permits (<= 0 is within).
   */
  worst: number;
}

const SCALE = 2n ** 64n;

/** An exact integer for `ms * 2^64`; throws if the reading has bits finer than that. */
function exactUnits(ms: number): bigint {
  const scaled = ms * 2 ** 64; // multiplying by a power of two is exact
  if (!Number.isInteger(scaled)) throw new RangeError(`reading ${ms} is not a multiple of 2^-64 ms`);
  return BigInt(scaled);
}

function positiveInteger(name: string, value: number): bigint {
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer here, got ${value}`);
  return BigInt(value);
}

function report(): ModelReport {
  return { violations: 0, admissions: 0, spent: 0, examples: [], worst: -Infinity };
}

function tally(r: ModelReport, admissions: readonly Admission[]): void {
  r.admissions = admissions.length;
  r.spent = admissions.reduce((s, a) => s + a.cost, 0);
}

/** Sorted by last reading, as the GCRA replay needs them. */
export function byLastReading<T extends Admission>(admissions: readonly T[]): T[] {
  return [...admissions].sort((a, b) => a.t - b.t || a.first - b.first);
}

/**
 * GCRA as a sequential model (virtual scheduling), over admissions sorted by last reading. With
 * emission interval I = periodMs / permits and tolerance tau = burst * I, an admission of `cost`
 * leaves tat' = max(tat, u) + cost * I and conforms when tat' - t <= tau + slack.
 *
 * For a call that read the clock once, u = t = its reading: the textbook model. For one that read
 * it several times the judged reading m lies in [first, t]: the check uses t (a later reading only
 * makes a check easier) and the state moves from u, the least `first` of this and every later
 * admission (never later than any reading judged from here on, so the model's tat never runs
 * ahead of the limiter's: no admission is blamed for its neighbour's uncertainty). Then a
 * violation means some set of admissions whose readings all lie in [u_k, t_j] spent more than
 * tau + (t_j - u_k) allows, whatever readings they were judged at.
 *
 * `slackMs` is a fixed tolerance added to tau for every check (it does not add up over the run).
 */
export function replayGcra(
  sorted: readonly Admission[],
  limit: { permits: number; periodMs: number; burst: number },
  slackMs: number,
): ModelReport {
  const permits = positiveInteger('permits', limit.permits);
  const periodMs = positiveInteger('periodMs', limit.periodMs);
  const burst = positiveInteger('burst', limit.burst);
  // The unit: 2^-64 ms / permits. An interval is then periodMs * 2^64 units exactly.
  const interval = periodMs * SCALE;
  const tau = burst * interval;
  const slack = BigInt(Math.ceil(slackMs * 2 ** 64)) * permits;
  const toMs = (units: bigint): number => Number(units) / 2 ** 64 / limit.permits;
  const r = report();
  tally(r, sorted);
  // u: suffix minimum of the first readings.
  const u: bigint[] = new Array(sorted.length);
  let least: bigint | null = null;
  for (let i = sorted.length - 1; i >= 0; i--) {
    const a = sorted[i] as Admission;
    if (i > 0 && a.t < (sorted[i - 1] as Admission).t) throw new RangeError('replayGcra needs admissions sorted by last reading');
    const f = exactUnits(Math.min(a.first, a.t)) * permits;
    least = least === null || f < least ? f : least;
    u[i] = least;
  }
  let tat: bigint | null = null;
  sorted.forEach((a, i) => {
    const t = exactUnits(a.t) * permits;
    const from = u[i] as bigint;
    const start: bigint = tat === null || tat < from ? from : tat;
    const next = start + BigInt(a.cost) * interval;
    const over = next - t - tau;
    r.worst = Math.max(r.worst, toMs(over));
    if (over > slack) {
      r.violations++;
      if (r.examples.length < 5) r.examples.push(`#${i} key ${a.key} cost ${a.cost} at ${a.t} ms (first reading ${a.first}): ${toMs(over)} ms over tau`);
    }
    tat = next; // the limiter admitted it: the model counts it whatever it thought
  });
  return r;
}

/**
 * Fixed window: the cost counted in each aligned window floor(m / periodMs) is at most `permits`.
 * An admission judged at m in [first, t] counts in a window from floor(first / P) to floor(t / P)
 * (a decision counts in the later of its own window and the one stored, and the stored one is
 * never later than the clock), so the check is Hall's condition: for every run of consecutive
 * windows, the admissions that must count inside it spend at most `permits` per window. For calls
 * that read the clock once that is exactly "each window holds at most `permits`".
 * A reservation (`reserved`) counts in the window it acts in, the reading's or the next: no
 * admission acts on a later window's count, so a window holds exactly the admissions judged in it
 * and the reservations that act in it.
 */
export function replayFixedWindow(admissions: readonly Admission[], limit: { permits: number; periodMs: number }): ModelReport {
  const permits = limit.permits;
  const period = positiveInteger('periodMs', limit.periodMs) * SCALE;
  const r = report();
  tally(r, admissions);
  // The range of windows each admission may count in, relative to the earliest window seen.
  const ranges = admissions.map((a) => ({
    lo: exactUnits(actMs(Math.min(a.first, a.t), a.reserved)) / period, hi: exactUnits(actMs(a.t, a.reserved)) / period, cost: a.cost,
  }));
  if (ranges.length === 0) return r;
  const base = ranges.reduce((m, x) => (x.lo < m ? x.lo : m), (ranges[0] as { lo: bigint }).lo);
  const spans = ranges.map((x) => ({ lo: Number(x.lo - base), hi: Number(x.hi - base), cost: x.cost }));
  const windows = spans.reduce((m, x) => Math.max(m, x.hi), 0) + 1;
  for (let lo = 0; lo < windows; lo++) {
    for (let hi = lo; hi < windows; hi++) {
      let cost = 0;
      for (const x of spans) if (x.lo >= lo && x.hi <= hi) cost += x.cost;
      const over = cost - permits * (hi - lo + 1);
      r.worst = Math.max(r.worst, over);
      if (over > 0) {
        r.violations++;
        if (r.examples.length < 5) r.examples.push(`windows ${base + BigInt(lo)}..${base + BigInt(hi)} of ${limit.periodMs} ms: ${cost} counted, ${permits * (hi - lo + 1)} allowed`);
      }
    }
  }
  return r;
}

/**
 * Sliding window (the two-window counter), exactly: at every moment x of an aligned window w,
 *
 *   prev * (1 - (x - w * periodMs) / periodMs) + curr(x) <= permits,
 *
 * with `prev` the cost that acted in window w - 1 and `curr(x)` the cost that acted in w up to x
 * (admissions at the reading they were judged at, reservations at the time they act: see
 * `reserved`). Why at every moment: each decision's estimate included every cost counted in its
 * window before it, wherever in the window that acts, and weighed the previous window at the
 * moment it acts itself; the estimate only falls between acts, so it is checked at each.
 *
 * An admission that read the clock more than once counts towards `prev` only if both its
 * readings lie in w - 1, and towards `curr(x)` only if both lie in w and the last is at most x:
 * the model then counts less than the limiter did and never blames an admission for the
 * uncertainty. `slack` (in requests) absorbs float rounding of the estimate and of act times,
 * far below one request: a violation is an estimate above `permits + slack`.
 */
export function replaySlidingWindow(acts: readonly Admission[], limit: { permits: number; periodMs: number }, slack = 1e-6): ModelReport {
  const period = positiveInteger('periodMs', limit.periodMs) * SCALE;
  const r = report();
  tally(r, acts);
  // Acts whose window is certain, by window.
  const inWindow = new Map<bigint, { t: number; cost: number }[]>();
  for (const a of acts) {
    const t = actMs(a.t, a.reserved);
    const w = exactUnits(t) / period;
    if (exactUnits(actMs(Math.min(a.first, a.t), a.reserved)) / period !== w) continue;
    const list = inWindow.get(w) ?? [];
    list.push({ t, cost: a.cost });
    inWindow.set(w, list);
  }
  for (const [w, list] of inWindow) {
    const prev = (inWindow.get(w - 1n) ?? []).reduce((s, a) => s + a.cost, 0);
    const start = Number(w) * limit.periodMs;
    list.sort((a, b) => a.t - b.t);
    let curr = 0;
    for (let i = 0; i < list.length; i++) {
      const a = list[i] as { t: number; cost: number };
      curr += a.cost;
      // Acts at one instant all count: check once the last of them is in.
      if (i + 1 < list.length && (list[i + 1] as { t: number }).t === a.t) continue;
      const estimate = prev * (1 - Math.max(0, a.t - start) / limit.periodMs) + curr;
      const over = estimate - limit.permits;
      r.worst = Math.max(r.worst, over);
      if (over > slack) {
        r.violations++;
        if (r.examples.length < 5) r.examples.push(`at ${a.t} ms (window ${w} of ${limit.periodMs} ms): ${prev} in the previous window and ${curr} in this one by then estimate ${estimate}, ${limit.permits} allowed`);
      }
    }
  }
  return r;
}

/**
 * The most cost admitted within less than `periodMs`: over every admission i, the cost of the
 * admissions whose readings all lie in [first_i, first_i + periodMs) (a request of cost c counts
 * c times). Returns that, and where the span starts.
 */
export function busiestSpan(admissions: readonly Admission[], periodMs: number): { most: number; from: number } {
  const period = positiveInteger('periodMs', periodMs) * SCALE;
  const xs = admissions.map((a) => ({ a: exactUnits(Math.min(a.first, a.t)), b: exactUnits(a.t), cost: a.cost, first: a.first }));
  xs.sort((p, q) => (p.a < q.a ? -1 : p.a > q.a ? 1 : 0));
  let most = 0;
  let from = 0;
  for (let i = 0; i < xs.length; i++) {
    const start = xs[i]!;
    const end = start.a + period;
    let sum = 0;
    // Sorted by first reading: every admission from i on starts at or after this one, and the
    // scan can stop at the first that starts at or after the span's end.
    for (let j = i; j < xs.length && xs[j]!.a < end; j++) if (xs[j]!.b < end) sum += xs[j]!.cost;
    if (sum > most) { most = sum; from = start.first; }
  }
  return { most, from };
}

/**
 * Sliding log: no span shorter than `periodMs` holds more than `permits` admitted requests (a
 * request of cost c counts c times, all at its reading). Reports one violation per starting
 * admission whose span holds too many.
 */
export function replaySlidingLog(admissions: readonly Admission[], limit: { permits: number; periodMs: number }): ModelReport {
  const period = positiveInteger('periodMs', limit.periodMs) * SCALE;
  const r = report();
  tally(r, admissions);
  const xs = admissions.map((a) => ({ a: exactUnits(Math.min(a.first, a.t)), b: exactUnits(a.t), adm: a }));
  xs.sort((p, q) => (p.a < q.a ? -1 : p.a > q.a ? 1 : 0));
  for (let i = 0; i < xs.length; i++) {
    const end = xs[i]!.a + period;
    let sum = 0;
    let last = xs[i]!.b;
    for (let j = i; j < xs.length && xs[j]!.a < end; j++) {
      if (xs[j]!.b >= end) continue;
      sum += xs[j]!.adm.cost;
      if (xs[j]!.b > last) last = xs[j]!.b;
    }
    const over = sum - limit.permits;
    r.worst = Math.max(r.worst, over);
    if (over > 0) {
      r.violations++;
      // The readings of these requests all lie within `last - a`, which is less than the period.
      const shortNs = Number(((end - last) * 1_000_000n) / SCALE);
      if (r.examples.length < 5) r.examples.push(`${sum} requests (${limit.permits} allowed) with readings from ${xs[i]!.adm.first} ms to ${Number(last) / 2 ** 64} ms: ${shortNs} ns short of ${limit.periodMs} ms`);
    }
  }
  return r;
}
