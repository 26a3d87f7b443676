// PolicyLimiter across a rule change (src/policy/: setRules publishing through rules-store.ts,
// and #prepare, which under the pair's lock moves the pair's state to the rules it was shaped
// under or newer, never back). Two rules: a default and one for user 'u', whose limits change
// shape with setRules (one GCRA limit, then two: the pair keeps the first limit's debt, and the
// second starts fresh).
// Thread 1 checks the pair in its set-up (under the first rules: the pair exists and has spent),
// then replaces the rules and checks the pair again; thread 0 checks the pair twice under the
// rules it read. The pair's api is long: a lookup then reads more words than the controller's
// spin rule lets a thread read in a row (SPIN_STEPS), as setRules does when it reads its rules back,
// so a lookup can be overtaken by a whole setRules and check.
// Checked: against an exact model in which each check is judged under the rules in force at its
// place in the order (setRules takes effect at its own place), a pair starts fresh only when the
// rule it is judged under has another shape than the one it was last spent under, and each rule's
// GCRA limits then count every spend made under it: an admission beyond them (spends wiped, or the
// pair restarted by a move back to older rules) is a violation, and so is a refusal the model
// does not explain. The model's fresh start admits at least what the limiter may, which keeps
// the debt of the limits both rules have (pair-shape.ts): its refusal after the change is one the
// model's refusal slack explains (a burst of 1).
import { allOf, callsOf, gcraModel, linearizable } from '../models.mjs';
import { tableWordNames, timeMoves } from './common.mjs';
import { tickEarly } from './_windows.mjs';

const HOUR = 3_600_000;
const START_MS = 4999.75;
const PAIR = { user: 'u', api: 'x'.repeat(100) };
const before = [{ limit: { permits: 5, periodMs: HOUR, burst: 5 } }, { user: 'u', limit: { permits: 1, periodMs: HOUR, burst: 1 } }];
const after = [before[0], { user: 'u', limit: [{ permits: 1, periodMs: HOUR, burst: 1 }, { permits: 10, periodMs: 24 * HOUR, burst: 10 }] }];

/** GCRA models of a rule's limits (64-bit GCRA: 1 ms ticks for these intervals). */
const modelOf = (rule) => allOf(...[rule.limit].flat().map((l) => tickEarly(gcraModel(l, { refusalSlackMs: 1 }), 1)));
const models = { before: modelOf(before[1]), after: modelOf(after[1]) };

/** The pair under the rules in force: { rules, shaped (the rules it was last spent under), state }. */
const policyModel = {
  init: () => ({ rules: 'before', shaped: null, state: null }),
  judge(s, o, reading) {
    if (o.op === 'setRules') return { admit: true, refuses: false, next: { ...s, rules: 'after' } };
    const m = models[s.rules];
    const state = s.shaped === s.rules ? s.state : m.init();
    const j = m.judge(state, o, reading);
    return { admit: j.admit, refuses: j.refuses, next: { rules: s.rules, shaped: s.rules, state: j.next } };
  },
};

export default {
  name: 'policy-rules',
  what: 'PolicyLimiter setRules against decisions: the pair moves forward to new rules once, its spends kept',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 }),
  // A run is about 450 steps (setRules writes and reads its rules byte by byte): fewer PCT runs.
  bounds: { ci: { pctRuns: 40 } },
  setup(lib) {
    const pl = new lib.PolicyLimiter({ rules: before, maxKeys: 4, hashSeed: 7 });
    return { buffers: [pl.handle.table, pl.handle.rules], data: { handle: pl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => pl.allow(PAIR));
      ctx.call('allow', () => pl.allow(PAIR));
    },
    (ctx, { handle }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle);
      pl.allow(PAIR); // set-up, at START_MS, under the first rules
      ctx.ready();
      ctx.call('setRules', () => {
        pl.setRules(after);
        return performance.now(); // a reading after the publish: the model places the change at one
      });
      ctx.call('allow', () => pl.allow(PAIR));
    },
  ],
  names: (buffers, lib) => {
    const table = tableWordNames(buffers[0], lib);
    const rules = ['version', 'writer lock', 'length 0', 'length 1'];
    return (buf, byte) => (buf === 0 ? table(byte) : byte < 16 ? `rules ${rules[byte >> 2]}` : `rules byte ${byte}`);
  },
  check(exec) {
    const outcome = (c) => (c.label === 'setRules' ? { key: 'rules', cost: 0, admitted: true, op: 'setRules' } : { key: 'u/x', cost: 1, admitted: c.result === true });
    // The set-up's admission comes first, at START_MS.
    const calls = [{ label: 'allow', readings: [START_MS], firstStep: -2, lastStep: -1, result: true, thread: 1, index: -1 }, ...callsOf(exec)];
    return linearizable(calls, policyModel, outcome);
  },
};
