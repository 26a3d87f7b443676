// The systematic explorer (explore/): it sees every shared access of the code it runs, it finds
// the bugs re-planted in a copy of dist/, and the schedule it found on today's code (an insert
// judging a fresh claim by an older reading) stays fixed. The bounded search over every
// scenario is `npm run explore`, which CI runs on its own.
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error plain JavaScript, no types
import { Explorer } from '../../explore/controller.mjs';
// @ts-expect-error plain JavaScript, no types
import { Dfs, Replay, search } from '../../explore/search.mjs';
// @ts-expect-error plain JavaScript, no types
import { budgetShare, CI_TOTAL_MS, mutatedDist } from '../../explore/run.mjs';
// @ts-expect-error plain JavaScript, no types
import { MUTATIONS } from '../../explore/mutations/index.mjs';
// @ts-expect-error plain JavaScript, no types
import { SCENARIOS } from '../../explore/scenarios/index.mjs';

const DIST = new URL('../../dist/index.js', import.meta.url).href;
const explorers: { close(): Promise<void> }[] = [];
/** Copies of dist/ with a fix reverted, removed after the tests. */
const mutants: string[] = [];
afterAll(async () => {
  await Promise.all(explorers.map((e) => e.close()));
  for (const dir of mutants) rmSync(dir, { recursive: true, force: true });
});

function mutant(name: string): string {
  const m = mutatedDist((MUTATIONS as { name: string }[]).find((x) => x.name === name));
  mutants.push(m.dir);
  return m.url;
}

function explorer(lib = DIST, threads = 2) {
  const e = new Explorer(threads, lib);
  explorers.push(e);
  return e;
}

/**
 * One explorer of the build per thread count, shared by the replays that run on the build (a new
 * explorer first loads the build in every thread: about 0.3 s).
 */
const builds = new Map<number, ReturnType<typeof explorer>>();
function buildExplorer(threads: number) {
  let e = builds.get(threads);
  if (e === undefined) builds.set(threads, (e = explorer(DIST, threads)));
  return e;
}

interface Entry { url: string; scenario: { name: string } }
const entry = (name: string): Entry => {
  const e = (SCENARIOS as Entry[]).find((s) => s.scenario.name === name);
  if (e === undefined) throw new Error(`no scenario ${name}`);
  return e;
};

async function fixture(name: string) {
  const url = new URL(`../fixtures/explore/${name}.mjs`, import.meta.url).href;
  return { url, scenario: (await import(url)).default };
}

describe('explorer', () => {
  it('fails a run that writes shared memory through a view it does not see', async () => {
    const { url, scenario } = await fixture('unseen-write');
    await expect(search(explorer(), url, scenario, new Replay(''), { nextRun: () => false })).rejects.toThrow(/a write it did not see/);
  });

  it('fails a run that calls Atomics on a shared view it does not see', async () => {
    const { url, scenario } = await fixture('unseen-atomics');
    const r = await search(explorer(), url, scenario, new Replay(''), { nextRun: () => false });
    expect(r.violation?.message).toMatch(/Atomics\.load on a shared view the explorer does not see/);
  });

  it('fails a replay whose schedule does not fit the build, and runs the next one', async () => {
    // Found: a schedule recorded before a change of the code's accesses named a choice its step no
    // longer had; the run threw with its threads stuck mid-call, and the explorer's next run
    // waited on them for ever (the whole test file hung).
    const { url, scenario } = entry('multi-limit');
    const e = explorer();
    await expect(search(e, url, scenario, new Replay('0:1 1:9'), { nextRun: () => false })).rejects.toThrow(/schedule: step 1 has \d+ options, not 10/);
    const r = await search(e, url, scenario, new Replay('0:1'), { nextRun: () => false });
    expect(r.violation).toBeNull();
  });

  it('runs a schedule the same way twice, access for access', async () => {
    const { url, scenario } = entry('gcra-32-insert');
    const e = explorer();
    const traces: unknown[] = [];
    for (let i = 0; i < 2; i++) {
      const r = await e.run(url, scenario, new Replay('2:1 3:2 11:1'));
      traces.push(r.trace.map((s: { thread: number; kind: string; byte: number; result: unknown }) => [s.thread, s.kind, s.byte, String(s.result)]));
    }
    expect(traces[1]).toEqual(traces[0]);
    expect((traces[0] as unknown[]).length).toBeGreaterThan(20);
  });

  it('an insert no longer takes over a claim stamped after its own reading (found by the explorer)', async () => {
    // Found on gcra-32-insert: thread 0 read the clock at 4999.75 ms and stopped; thread 1 moved
    // the clock to 5000 ms and claimed the key's slot; thread 0 judged that claim, stamped after
    // its reading, 2^29 - 1 ms old, took it over, and both inserters wrote the slot: the key's
    // state was reset under an admission decided after the insert. A 32-bit first check is now
    // admitted by its insert (Gcra32.pendingCost), and that schedule is gone; the width-64 path
    // still decides after its insert, and this is the schedule the search finds there with the
    // bug planted again (11:1 17:4 since a lookup loads the reclaim floor's sequence; 10:1 16:4
    // since an insert reads the clock once more, right after its claim: insert.ts, bornOld; it was
    // 9:1 11:4).
    const { url, scenario } = entry('gcra-64');
    const fixed = await search(buildExplorer(2), url, scenario, new Replay('11:1 17:4'), { nextRun: () => false });
    expect(fixed.violation).toBeNull();
    const build = mutant('claim judged by an older reading');
    const before = await search(explorer(build), url, scenario, new Replay('11:1 17:4'), { nextRun: () => false });
    expect(before.violation?.message).toMatch(/over-admission/);
  });

  it('a locked reset\'s lock is not taken over at the steal age (the schedule that once found its answer wrong)', async () => {
    // Deep bounds found it: thread 1's reset read the key's log under its lock and stopped;
    // thread 0 took the lock over past the steal age, refused (wrote nothing) and let it go;
    // the reset's compareExchanges then landed (nothing had changed since it read), it found its
    // lock lost and tried again, found the key fresh, and answered false: "nothing owed" for a
    // key it had just reset. Fixed then by answering from every try (FreshState.wrote). Since a
    // log's reset holds a guarded token (table/slot-lock.ts), taken over only past the table's
    // reuse age, the takeover that schedule needs is no longer made: the guard reverted, it is.
    const { url, scenario } = entry('locked-reset');
    const fixed = await search(buildExplorer(2), url, scenario, new Replay('19:1 40:1 56:2'), { nextRun: () => false });
    expect(fixed.violation).toBeNull();
    const build = mutant('(planted) a log reset taken over at the steal age');
    const before = await search(explorer(build), url, scenario, new Replay('19:1 40:1 56:2'), { nextRun: () => false });
    expect(before.violation?.message).toMatch(/taken over while fresh: .* a guarded token/);
  });

  it('a reservation decided after a clock step back counts its delay from the clock (deep schedule 4:6)', async () => {
    // Thread 0 reserves: it reads 5499.75 ms, then the clock steps back to 4499.75 ms and the
    // decision stays at 5499.75 (a thread's readings never go back): no wait, act at 5499.75,
    // a delay of 1,000 ms on the clock. It cancels; thread 1's check at 4499.75 is clamped to the
    // key's second (5000 ms) and passes. The model first judged the delay as the wait alone and
    // called that an over-admission; a delay without the lead would let the caller act 1,000 ms
    // before the time it was given.
    const { url, scenario } = entry('reserve');
    const fixed = await search(buildExplorer(2), url, scenario, new Replay('4:6'), { nextRun: () => false });
    expect(fixed.violation).toBeNull();
    const build = mutant('a reservation whose delay forgets the clamp');
    const before = await search(explorer(build), url, scenario, new Replay('4:6'), { nextRun: () => false });
    expect(before.violation?.message).toMatch(/over-admission/);
  });

  it('an old TAT under a stamp a pending decision raised reads as owing nothing (deep schedule 25:4 28:1 54:3)', async () => {
    // Thread 1 loaded k's TAT (5499.75 ms), the clock wrapped (2^31 ticks later), and it raised
    // k's stamp and stopped before its compareExchange. Thread 2 then read the old TAT under the
    // new stamp as 21.4 s of debt: its block('k', 700) threw RangeError (past the horizon).
    // (Found as 18:4 21:1 40:3; the steps moved when reward and reset took their mark's guard, to
    // 24:4 27:1 52:3, and when lookups loaded the reclaim floor's sequence.)
    const { url, scenario } = entry('key-controls');
    const fixed = await search(buildExplorer(3), url, scenario, new Replay('25:4 28:1 54:3'), { nextRun: () => false });
    expect(fixed.violation).toBeNull();
    const build = mutant('an old TAT under a raised stamp read as debt');
    const before = await search(explorer(build, 3), url, scenario, new Replay('25:4 28:1 54:3'), { nextRun: () => false });
    expect(before.violation?.message).toMatch(/over-admission|phantom refusal|threw/);
  });

  // The guards of 2026-12-06, the window block word, a stamp ahead of its reading, the reclaim
  // floor, a policy reshape's lock check and a log holder's: each re-planted bug's schedule, found by a longer
  // search than CI's (the DFS reaches cost 2 only on a quiet machine, or only in deep mode),
  // replayed on the build and on the mutant, so that a busy machine cannot miss them.
  it.each([
    ['gcra-give-back-aba', 'a one-limit give-back without its mark guard', '9:1 33:1'],
    ['gcra-give-back-aba-64', 'a width-64 one-limit give-back without its mark guard', '11:1 35:1'],
    ['reserve-aba', 'a one-limit refund without its mark guard', '12:1 47:1'],
    // The build decides the short block again after the long one landed: thread 2's second reading,
    // the one moved to the next second, is three steps later there (two before a limit decided
    // again read ctrl after its new snapshot, LimitSet.commit's holds).
    ['window-block', 'a window block that stores its end over a longer one', '8:1 53:2', '8:1 56:2'],
    // Found by the deep run of 2026-12-06 (PCT, as 0:1 11:2 28:1 29:1 43:1 46:5 before lookups
    // loaded the reclaim floor's sequence, and as 0:1 11:2 29:1 30:1 45:1 48:5 before a limit
    // decided again read ctrl after its new snapshot): the penalty's reading is 1 s behind the
    // give-back guard's stamp, which read as 2^20 - 1,000 ms old and was taken over.
    ['window-penalty', 'a stamp ahead of the reading read as old', '0:1 11:2 29:1 30:1 47:1 50:5'],
    // The key reclaimed by a sweep at 5000 ms, inserted again at 4999.99999 ms: without the
    // reclaim floor, fresh in the first window (found on fixed-window as 0:1 32:1 40:2 66:4).
    // (0:1 8:2 36:1 37:4 before an admission in the second of its own write started from that
    // write: thread 0's check now reads the clock first, and in a new second again after its loads.)
    ['reclaim-floor', 'an insert below the reclaim floor', '0:6 8:2 36:5'],
    // Thread 0 stops under k's lock after its ctrl check; thread 1, past the reclaim wait, sweeps
    // (k is reclaimed, its lock taken over) and spends j, which takes k's slot. Thread 0 then reads
    // j's words for k's reshape: without the lock check between its reads and its writes, it
    // writes a fresh fixed window over them, and j is admitted again (the bug f353f07 fixed). Since
    // a reshape holds a guarded token (pair-shape.ts, writesState), it stops in its second try: 21,
    // was 12.
    ['policy-reshape-reuse', "a policy reshape that wiped another pair's spends", '21:4'],
    // Thread 0 passes its lock check; thread 1 moves the clock past the steal age, takes the lock
    // over and writes its log entry; thread 0's compareExchange fails, and without the lock check
    // in its retry it decides the lost race again and writes over thread 1's entry (53b46f4).
    ['locked-log-held', 'taken-over log holder rewrote the new holder entry', '18:1 19:1 31:1 38:1'],
  ])('%s: the schedule that breaks "%s" (%s) is clean on the build', async (name, mutation, schedule, onBuild = schedule) => {
    const { url, scenario } = entry(name);
    const fixed = await search(buildExplorer(3), url, scenario, new Replay(onBuild), { nextRun: () => false });
    expect(fixed.violation).toBeNull();
    const before = await search(explorer(mutant(mutation), 3), url, scenario, new Replay(schedule), { nextRun: () => false });
    expect(before.violation?.message).toMatch(/over-admission|log entry dated early/);
  });

  it('reserve-64: a cancel one ulp before its act time is judged before it, as the limiter compares (deep schedule 0:1 17:2 31:3)', async () => {
    // The clock's "interval edge" move lands at 4,096,000.0000079996 ms, the double just below the
    // reservation's act time 4,096,000.000008. Reservation.cancel compares the two in ms and gives
    // back; the checker put both on one tick of its grid, judged the cancel too late, and called
    // the refund an over-admission (deep run of 2026-12-06, then 0:1 16:2 30:3). It now judges
    // "before its act" on the readings in ms.
    const { url, scenario } = entry('reserve-64');
    const r = await search(buildExplorer(2), url, scenario, new Replay('0:1 17:2 31:3'), { nextRun: () => false });
    expect(r.violation).toBeNull();
  });

  it.each([
    // T0's allow lost its compareExchange, decided again and kept a spend in the key's new
    // incarnation (conservative: it reports a refusal). That spend moved T1's reservation to the
    // next window, and its cancel gave that window back: a place the model, which has no such
    // spend, never placed, so the checker called the cancel an over-admission (an attack's PCT
    // schedule). Only the set-up's admission happened.
    // (Found as 0:2 8:3 15:1 21:1 44:1 50:2; found again with the cancel judged strictly, by a deep
    // run, once an admission in the second of its own write started from that write.)
    ['a cancel of a place the model never placed', '0:3 5:2 34:2 36:4 51:1 83:1 97:1'],
    // The cancel gives back the place the model holds, and T0 takes it: a checker that left such
    // cancels out (a first try at the case above) called T0's admission an over-admission.
    // (Found as 0:1 33:1 41:2; found again with such cancels left out, by the CI search, once an
    // admission in the second of its own write started from that write.)
    ['a cancel whose place a later check takes', '0:6 33:6 41:2'],
  ])('fixed-window, its key reclaimed under a call: %s (%s) is taken as it comes', async (_what, schedule) => {
    const { url, scenario } = entry('fixed-window');
    const r = await search(buildExplorer(3), url, scenario, new Replay(schedule), { nextRun: () => false });
    expect(r.violation).toBeNull();
  });

  it('a coarse clock publish stopped for four epochs no longer puts its old epoch back (found by the explorer)', async () => {
    // Thread 0 publishes 1000.51 ms and stops before it writes its epoch's slot; thread 1
    // publishes after a stop of four epochs (2^32 units), whose epoch takes the same slot. The
    // plain store thread 0 then made put epoch 0 back under the new word, and its next reading
    // was 1000.51 ms again, 42,950 s behind.
    const { url, scenario } = entry('coarse-clock-stall');
    const fixed = await search(buildExplorer(2), url, scenario, new Replay('0:1 3:3'), { nextRun: () => false });
    expect(fixed.violation).toBeNull();
    const build = mutant('stalled publish put an old epoch back');
    const before = await search(explorer(build), url, scenario, new Replay('0:1 3:3'), { nextRun: () => false });
    expect(before.violation?.message).toMatch(/the clock went back/);
  });

  it('finds a re-planted duplicate insert within the CI bounds', async () => {
    const { url, scenario } = entry('gcra-32-insert');
    const build = mutant('duplicate insert');
    const r = await search(explorer(build), url, scenario, new Dfs({ preemptions: 2, timeMoves: 1 }), { nextRun: (c: { next(): boolean }) => c.next() });
    expect(r.violation?.message).toMatch(/2 live copies/);
  });

  it('every re-planted bug still applies to today\'s build: each edit\'s text is there exactly once, its scenario exists', () => {
    // Found: two mutations went stale when the code they edit moved (the block debt to
    // math/gcra.ts, SlotRef's second to two halves), and `--mutations` stopped at the first.
    const root = new URL('../../dist/', import.meta.url).pathname;
    const names = new Set((SCENARIOS as Entry[]).map((e) => e.scenario.name));
    const stale: string[] = [];
    for (const m of MUTATIONS as { name: string; scenario: string; edits: { file: string; from: string }[] }[]) {
      if (!names.has(m.scenario)) stale.push(`${m.name}: no scenario ${m.scenario}`);
      for (const e of m.edits) {
        const count = readFileSync(join(root, e.file), 'utf8').split(e.from).length - 1;
        if (count !== 1) stale.push(`${m.name}: ${e.file} holds its text ${count} times`);
      }
    }
    expect(stale).toEqual([]);
  });

  it('leaves no hook in dist/: nothing there reaches the explorer or replaces Atomics or the clock', () => {
    const root = new URL('../../dist/', import.meta.url).pathname;
    const files = (readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith('.js'));
    expect(files.length).toBeGreaterThan(40);
    for (const f of files) {
      const text = readFileSync(join(root, f), 'utf8');
      expect(text, f).not.toMatch(/explore\/|globalThis\.Atomics\s*=|Atomics\s*=\s|performance\.now\s*=/);
    }
  });

  it('keeps the CI search within its total time: budgets shrink when the time left cannot hold them', () => {
    const all = SCENARIOS as Entry[];
    const start = budgetShare(all, 0);
    expect(start).toBeLessThanOrEqual(1);
    expect(start).toBeGreaterThan(budgetShare(all, 60_000)); // less time left, smaller budgets
    expect(start).toBeGreaterThan(0.5); // at the start most of every budget
    expect(budgetShare(all.slice(-1), 0)).toBe(1);
    const last = all.slice(-3);
    const share = budgetShare(last, CI_TOTAL_MS - 6_000); // 6 s left for three scenarios
    expect(share).toBeGreaterThanOrEqual(0.25);
    expect(share).toBeLessThan(1);
    expect(budgetShare(last, CI_TOTAL_MS + 60_000)).toBe(0.25); // past the total: a quarter each
  });
});
