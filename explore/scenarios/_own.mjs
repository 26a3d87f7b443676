// An admission that starts from this thread's own latest writes (LockFreeEngine#allowOwn and
// #allowOwnTwo: no load of the key's limits, a compareExchange from each own write, a cap served
// from the thread's batch) racing one from loads. Thread 0
// admits the key twice: its first admission loads and writes the key's limits, and its second,
// in the same second, starts from those writes. Thread 1 admits it once, from loads. One limit
// holds two a minute, so at most two of the three pass; any other lets each through, so the
// tight limit's commit, when another thread overtook it, must count. The variants put the tight
// limit first or second of two GCRA limits, or second of two fixed windows (#allowOwnTwo), or
// make the key's one limit a fixed window, or a GCRA limit under a cap served in per-thread batches (#allowOwn; one GCRA limit
// without a cap takes Gcra32's own path instead). Readings start 250 ms before a second's end, so that a move to the next second
// (where #allowOwn gives way to loads) is one of the schedules. The variants 'reclaim' and 'loads'
// change the calls instead: thread 1 reclaims the key and admits it again while thread 0's record
// of it, or its snapshot, ages (see VARIANTS). Checked: admissions and refusals
// against the models of every limit together (each GCRA limit's readings floored to its tick);
// one live copy of the key.
import { allOf, callsOf, gcraModel, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';
import { fixedWindowModel, tickEarly } from './_windows.mjs';
import { cap } from './_global-batch.mjs';

const perMinute = { permits: 2, periodMs: 60_000, burst: 2 };
const perSecond = { permits: 10, periodMs: 1000, burst: 10 };
// Each GCRA limit floors readings to its own tick: 1 us at two a minute, 10 ns at ten a second.
const minuteModel = () => tickEarly(gcraModel(perMinute, { refusalSlackMs: 1e-3 }), 1e-3);
const secondModel = () => tickEarly(gcraModel(perSecond, { refusalSlackMs: 1e-5 }), 1e-5);

/** Three a minute, then ten a second: the two GCRA limits of the variant 'reclaim'. */
const tight = { permits: 3, periodMs: 60_000, burst: 3 };

/**
 * Every reading later than the one before, by a microsecond (the tight limit's tick) at least: no
 * 'stay' and no step back. A reading repeated lets another thread rebuild the very words this
 * thread last wrote on the key's next incarnation, whose commit then lands there: the
 * conservative corner docs/testing.md lists under "Found, not yet fixed" (the variant 'reclaim'
 * finds it with 'stay': a phantom refusal).
 */
function risingTime() {
  const moves = timeMoves({ startMs: 3999.75, tickMs: 1e-3, intervalMs: 100, backMs: [] });
  return { ...moves, moves: moves.moves.filter((m) => m.name !== 'stay') };
}

/** The calls of each thread unless a variant names its own: two admissions, then one. */
const RACE = [['allow k', 'allow k'], ['allow k']];

/** What each call does on the thread's limiter `rl`. */
const CALLS = {
  'allow k': (rl) => rl.allow('k'),
  'reset k': (rl) => rl.reset('k'),
  sweep: (rl) => rl.sweep(),
};

/** A call's outcome as the models read it: an admission of cost 1; a reset that found a debt forgets the key's spends. */
function outcomeOf(c) {
  if (c.error !== null || c.label === 'sweep') return null; // a sweep changes nothing the models see
  // A reset that found nothing owed (false; an absent key reads no clock) changes nothing.
  if (c.label === 'reset k') return c.result === true ? { key: 'k', cost: 0, op: 'reset', admitted: true } : null;
  return { key: 'k', cost: 1, admitted: c.result === true };
}

const VARIANTS = {
  first: {
    what: 'two GCRA limits, the first binds',
    options: (lib) => ({ limit: [lib.perMinute(2), lib.perSecond(10)] }),
    model: () => allOf(minuteModel(), secondModel()),
  },
  second: {
    what: 'two GCRA limits, the second binds',
    options: (lib) => ({ limit: [lib.perSecond(10), lib.perMinute(2)] }),
    model: () => allOf(secondModel(), minuteModel()),
  },
  cap: {
    // The cap (burst 400) cannot refuse three requests: it is there to send the key to #allowOwn.
    // It was written when the limiter was made, at the first reading: a clock that steps back
    // behind that finds it ahead and refuses until the clock catches up (see Clock), which the
    // model, starting it fresh, does not. So only admissions are judged, as in global-batch.
    what: 'one GCRA limit under a global cap served in batches',
    judgeRefusals: false,
    options: (lib) => ({ limit: lib.perMinute(2), globalLimit: cap }),
    model: () => allOf(minuteModel(), tickEarly(gcraModel(cap, { keyOf: () => 'global' }), 1e-5)),
  },
  windows: {
    what: 'two fixed windows, the tight one second',
    options: () => ({ limit: [{ permits: 10, periodMs: 1000 }, { permits: 2, periodMs: 60_000 }], algorithm: 'fixed-window' }),
    model: () => allOf(fixedWindowModel({ permits: 10, periodMs: 1000 }), fixedWindowModel({ permits: 2, periodMs: 60_000 })),
  },
  window: {
    what: 'a fixed window',
    options: () => ({ limit: { permits: 2, periodMs: 60_000 }, algorithm: 'fixed-window' }),
    model: () => fixedWindowModel({ permits: 2, periodMs: 60_000 }),
  },
  // A record of the key older than a reclaim of it (LockFreeEngine#allowOwnTwo): thread 0 admits
  // the key three times, its later admissions in the same second from its own writes, through a
  // record that may still name the old incarnation; thread 1 resets the key, sweeps (which
  // reclaims it once it is fresh) and admits it twice, inserting it again, likely into the same
  // slot. A commit from a stale record must not be decided again on the key's next incarnation
  // (found by an attack: the spend landed there, then was counted again on the relocated key).
  reclaim: {
    what: 'two GCRA limits, the first binds, the record of the key older than a reset, a sweep and an insert of it by the other thread',
    options: () => ({ limit: [tight, perSecond] }),
    model: () => allOf(tickEarly(gcraModel(tight, { refusalSlackMs: 1e-3 }), 1e-3), secondModel()),
    time: risingTime,
    calls: [['allow k', 'allow k', 'allow k'], ['reset k', 'sweep', 'allow k', 'allow k']],
  },
  // The same race on the path from loads (LockFreeEngine#allowGcra): thread 0's first admission
  // inserts the key and decides on a snapshot of it, fresh; thread 1 sweeps (which reclaims the
  // key while it is fresh) and admits it, inserting it again, likely into the same slot. A limit
  // of thread 0's that lost its race must not be decided again and written on the key's next
  // incarnation (found by own-write-reclaim at 20 s: the request was counted twice there, and
  // thread 0's next admission was refused). The second admission of thread 0 shows the count.
  loads: {
    title: "an admission from loads whose limits lose their races to a sweep and an insert of its key by another thread (LockFreeEngine#allowGcra, LimitSet.commit's holds)",
    options: () => ({ limit: [tight, perSecond] }),
    model: () => allOf(tickEarly(gcraModel(tight, { refusalSlackMs: 1e-3 }), 1e-3), secondModel()),
    time: risingTime,
    calls: [['allow k', 'allow k'], ['sweep', 'allow k']],
  },
};

/** The scenario of variant `which` (a key of VARIANTS). */
export function ownWriteScenario(name, which) {
  const v = VARIANTS[which];
  return {
    name,
    what: v.title ?? `an admission from the thread's own writes racing one from loads: ${v.what} (LockFreeEngine#allowOwn)`,
    time: v.time?.() ?? timeMoves({ startMs: 3999.75, tickMs: 1e-5, intervalMs: 100 }),
    // A quarter of the usual CI budget keeps npm run explore near its 3 minutes with six such
    // scenarios (each planted bug of explore/mutations/own-write.mjs is found in under a second).
    bounds: { ci: { dfsBudgetMs: 2_000, pctBudgetMs: 500 } },
    setup(lib) {
      const rl = new lib.RateLimiter({ ...v.options(lib), maxKeys: 4, hashSeed: 7 });
      return { buffers: [rl.handle.table], data: { handle: rl.handle } };
    },
    threads: (v.calls ?? RACE).map((labels) => (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      for (const label of labels) ctx.call(label, () => CALLS[label](rl));
    }),
    names: tableNames,
    check(exec, lib) {
      return liveCopies(exec.buffers[0], lib, ['k'])
        ?? linearizable(callsOf(exec), v.model(), outcomeOf, { judgeRefusals: v.judgeRefusals ?? true });
    },
  };
}
