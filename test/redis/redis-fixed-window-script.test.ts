// The fixed-window script written out for its limits (src/redis/lua-fixed-window.ts) against the
// generic script (lua-algorithms.ts's FIXED, which redis-vectors.test.ts holds to the
// shared-memory windows), on one real redis-server: random steps of decisions, leases, probes,
// late calls, give-backs, rewards, penalties and blocks, on plans of one or two key limits and a
// cap, batches of up to three decisions (a key twice in one batch too), with time that stays,
// moves, crosses windows and steps back. Every answer, every stored state and every expiry is
// the same.
import { describe, expect, it } from 'vitest';
import { genericScriptText, limitsScript } from '../../src/redis/limits-script.js';
import { redisLimit, scriptPlan, type RedisLimit } from '../../src/redis/redis-limits.js';
import { aloneOutcome, batchOutcomes, type Outcome } from '../../src/redis/script-batcher.js';
import { privateRedis, redisAvailable } from '../helpers/redis-server.js';

const available = redisAvailable();

const fw = (permits: number, periodMs: number): RedisLimit => redisLimit('fixed-window', { permits, periodMs }, 'limit', 1);

interface Plan {
  key: RedisLimit[];
  cap: RedisLimit[];
}

describe.skipIf(!available)('the fixed-window script written out', () => {
  const redisServer = privateRedis();

  it('is the script a plan of fixed windows gets, batch and single, and not the generic one', () => {
    const s = limitsScript([fw(3, 1_000), fw(10, 60_000)], [fw(100, 1_000)]);
    const generic = genericScriptText([fw(3, 1_000), fw(10, 60_000)], [fw(100, 1_000)]);
    expect(s.text).not.toBe(generic);
    expect(s.single).not.toBeNull();
    // A decision reaches no function of the script's own: the algorithms' table is made only
    // inside the handler of refunds and controls.
    const decisionPart = s.text.slice(s.text.indexOf('  else\n  local status'));
    expect(decisionPart).not.toMatch(/ALGORITHMS|FIXED\./);
    // Sliding windows and logs keep the generic script.
    const sliding = redisLimit('sliding-window', { permits: 3, periodMs: 1_000 }, 'limit', 1);
    expect(limitsScript([sliding], []).text).toBe(genericScriptText([sliding], []));
    expect(limitsScript([sliding], []).single).toBeNull();
  });

  it('found: a stored count that is not a number refuses, as the generic script does; one that is not whole is rounded alike', async () => {
    // An attack stored "window:nan" (a value the library never writes: another program on the
    // prefix, or corruption): the written-out check passed it (a comparison with NaN is false)
    // and then admitted every request of that window; the generic check refuses it.
    const io = redisServer.io;
    const plan = { key: [fw(3, 1_000)], cap: [fw(5, 1_000)] };
    const generic = genericScriptText(plan.key, plan.cap);
    const sp = scriptPlan(plan.key, plan.cap, 'p:');
    const single = sp.script.single as { text: string };
    const now = 1_700_000_000_000_000;
    const w = Math.floor(now / 1_000_000);
    for (const stored of [`${w}:nan`, `${w}:0.5`, `${w}:2.5:0:${now - 1}`, `${w}:1`, `${w}:-1`]) {
      const seen: unknown[] = [];
      for (const [side, run] of [
        ['g', (k: string[]) => io.eval(generic, k.length, ...k, '1,1,0,1', now)],
        ['b', (k: string[]) => io.eval(sp.script.text, k.length, ...k, '1,1,0,1', now)],
        ['s', (k: string[]) => io.eval(single.text, k.length, ...k, 1, 0, 1, now)],
      ] as const) {
        const keys = [`bad:${side}:{k}:0`, `bad:${side}:cap:0`];
        await io.del(...keys);
        await io.set(keys[0] as string, stored);
        const reply = await run(keys) as number[];
        const outcome = side === 's' ? aloneOutcome(reply, sp, 1) : (batchOutcomes(reply, sp, [1]))[0];
        seen.push({ outcome, after: await io.mget(...keys) });
      }
      expect(seen[1], `${stored}: batch`).toEqual(seen[0]);
      expect(seen[2], `${stored}: single`).toEqual(seen[0]);
      if (stored.endsWith(':nan')) expect(seen[0]).toMatchObject({ outcome: { status: 1 }, after: [stored, null] });
    }
  });

  it('answers, stores and expires exactly as the generic script, over random steps', async () => {
    const io = redisServer.io;
    const plans: Plan[] = [
      { key: [fw(3, 1_000)], cap: [] },
      { key: [fw(2, 200), fw(5, 1_000)], cap: [] },
      { key: [fw(4, 1_000)], cap: [fw(6, 500)] },
      { key: [fw(2, 300), fw(3, 700)], cap: [fw(5, 1_000), fw(9, 3_000)] },
    ];
    let seed = 4_242;
    const rand = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return Math.floor(seed / 2 ** 16) % n;
    };
    const seen = { statuses: new Set<number | string>(), single: new Set<number>(), blocked: 0, ahead: 0, rare: 0 };
    for (const [p, plan] of plans.entries()) {
      const generic = genericScriptText(plan.key, plan.cap);
      const sp = scriptPlan(plan.key, plan.cap, 'p:');
      const straight = sp.script;
      const single = straight.single as { text: string };
      /** The Redis keys of decision j's user key `user` on side `side`, then the cap's. */
      const keysOf = (side: string, users: number[]): string[] => [
        ...users.flatMap((u) => plan.key.map((_, i) => `fw${p}:${side}:{u${u}}:${i}`)),
        ...plan.cap.map((_, i) => `fw${p}:${side}:cap:${i}`),
      ];
      let now = 1_700_000_000_000_000 + p * 7_919;
      const spends: number[] = [];
      for (let step = 0; step < 500; step++) {
        now += [0, 0, 1, 999, 100_000, 1_000_000, -300_000, 0.75][rand(8)] as number; // 0.75: the tests' time need not be whole
        const n = 1 + rand(3);
        const users = Array.from({ length: n }, () => rand(3));
        const decisions = users.map(() => {
          const kind = rand(16);
          if (kind === 0 && spends.length > 0) return { cost: -(1 + rand(2)), deadline: spends[rand(spends.length)] as number, want: 1 }; // a give-back
          if (kind === 1) return { cost: -(1 + rand(3)), deadline: 0, want: 0 }; // a reward
          if (kind === 2) return { cost: 1 + rand(3), deadline: 0, want: -1 }; // a penalty
          if (kind === 3) return { cost: 1 + rand(2_000_000), deadline: rand(2) === 0 ? 0 : now - 1, want: -2 }; // a block, late or not
          if (kind === 4) return { cost: 0, deadline: 0, want: 0 }; // a probe
          if (kind === 5) return { cost: 1, deadline: now - 1, want: 1 }; // late
          const cost = kind === 6 ? 7 : 1 + rand(3); // 7: more than any limit holds
          return { cost, deadline: rand(2) === 0 ? 0 : now + 5, want: kind === 7 ? cost + rand(4) : cost };
        });
        for (const d of decisions) if (d.cost > 0 && d.want >= 0) spends.push(now);
        const packed = [n, ...decisions.flatMap((d) => [d.cost, d.deadline, d.want])].join(',');
        const gKeys = keysOf('g', users);
        const bKeys = keysOf('b', users);
        const allKeys = ['g', 'b', 's'].flatMap((side) => keysOf(side, [0, 1, 2]));
        const tx = io.multi()
          .time()
          .eval(generic, gKeys.length, ...gKeys, packed, now)
          .eval(straight.text, bKeys.length, ...bKeys, packed, now);
        for (const [j, d] of decisions.entries()) {
          const k = keysOf('s', [users[j] as number]);
          tx.eval(single.text, k.length, ...k, d.cost, d.deadline, d.want, now);
        }
        const unique = [...new Set(allKeys)];
        for (const k of unique) tx.pttl(k);
        tx.time();
        for (const k of unique) tx.persist(k);
        tx.mget(...unique);
        const [before, ...results] = ((await tx.exec()) ?? []).map(([e, r]) => {
          if (e) throw e;
          return r;
        });
        const [fromGeneric, fromBatch] = results as [number[], number[]];
        const fromSingles = results.slice(2, 2 + n) as number[][];
        const ttls = results.slice(2 + n, 2 + n + unique.length) as number[];
        // Redis's clock runs on while the transaction does (a busy machine may deschedule it).
        const ms = ([sec, us]: [string, string]): number => Number(sec) * 1000 + Number(us) / 1000;
        const apartMs = ms(results[2 + n + unique.length] as [string, string]) - ms(before as [string, string]);
        const stored = results[results.length - 1] as (string | null)[];
        const costs = decisions.map((d) => d.cost);
        const what = `plan ${p}, step ${step}: ${JSON.stringify(decisions)} on users ${users.join(',')}`;
        const expected = batchOutcomes(fromGeneric, sp, costs) as Outcome[]; // no decision here raises an error
        expect(batchOutcomes(fromBatch, sp, costs), what).toEqual(expected);
        // A single call answers after its one decision: its cap's block is the cap's then, and
        // equals the batch's (after the whole batch) at the last decision.
        fromSingles.forEach((reply, j) => {
          const one = aloneOutcome(reply, sp, costs[j] as number);
          const batched = expected[j];
          if (typeof one === 'object' && typeof batched === 'object') {
            expect({ ...one, capBlockedUs: 0 }, `${what}: single ${j}`).toEqual({ ...batched, capBlockedUs: 0 });
            if (j === n - 1) expect(one.capBlockedUs, `${what}: single ${j}'s cap`).toBe(batched.capBlockedUs);
          } else {
            expect(one, `${what}: single ${j}`).toEqual(batched);
          }
          seen.single.add(reply.length - (plan.cap.length > 0 ? 2 : 1));
        });
        // Each side's states and expiries: the generic's are the reference.
        const byKey = new Map(unique.map((k, i) => [k, { v: stored[i], ttl: ttls[i] as number }]));
        const state = (side: string, rest: string): { v: string | null | undefined; ttl: number } => byKey.get(`fw${p}:${side}:${rest}`) ?? { v: null, ttl: -2 };
        const rests: [string, number][] = [
          ...[0, 1, 2].flatMap((u) => plan.key.map((l, i): [string, number] => [`{u${u}}:${i}`, l.args[0]])),
          ...plan.cap.map((l, i): [string, number] => [`cap:${i}`, l.args[0]]),
        ];
        for (const [rest, periodUs] of rests) {
          const g = state('g', rest);
          for (const side of ['b', 's']) {
            const o = state(side, rest);
            expect(o.v, `${what}: ${side} ${rest}`).toBe(g.v);
            // Expiries count on Redis's clock from each write, read a few commands apart (PERSIST
            // then keeps them): the same but for the time that passed between.
            expect(Math.abs(o.ttl - g.ttl), `${what}: ${side} ${rest}'s expiry ${o.ttl} against ${g.ttl}, ${apartMs} ms apart`)
              .toBeLessThanOrEqual(2 + Math.ceil(apartMs));
          }
          const parts = g.v?.split(':').map(Number) ?? [];
          if ((parts[2] ?? 0) > now) seen.blocked++;
          if ((parts[0] ?? 0) > Math.floor(now / periodUs)) seen.ahead++;
        }
        for (const o of expected) seen.statuses.add(typeof o === 'object' ? o.status : o);
        seen.rare += decisions.filter((d) => d.cost < 0 || d.want < 0).length;
      }
    }
    // Every kind of answer came up: admitted, refused, never, the cap's, late; the single form
    // answered late, plain and in six fields; blocks were stored, windows were stored ahead of a
    // clock that stepped back, and rare steps ran.
    expect([...seen.statuses].sort()).toEqual([0, 1, 2, 3, 'late']);
    expect([...seen.single].sort()).toEqual([0, 2, 6]);
    expect(seen.blocked).toBeGreaterThan(0);
    expect(seen.ahead).toBeGreaterThan(0);
    expect(seen.rare).toBeGreaterThan(100);
  });
});
