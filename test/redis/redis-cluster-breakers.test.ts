// Breakers per primary on a Redis Cluster. Found: one breaker covered the whole limiter, so
// killing 1 of 3 primaries (no replica) degraded 90-100% of calls on all 200 keys, though only
// a third of the keys lived there. Real three-primary cluster; one primary stopped (SIGSTOP:
// calls to it hang, as to a frozen or unreachable server) and continued.
//
// A busy machine can make a healthy primary miss a deadline too (3 in a row open its breaker,
// rightly): each test allows 1 s per call, and tries its scenario again, up to 3 times, until a
// run shows no healthy primary's key degraded. The stopped primary's keys must be degraded in
// every round of every run.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { perHour, perMinute, perSecond, RedisRateLimiter } from '../../src/index.js';
import { keySlot } from '../../src/redis/key-slot.js';
import { globalKey, keyBase } from '../../src/redis/redis-keys.js';
import { redisAvailable, startCluster, type ClusterNode, type TestCluster } from '../helpers/redis-cluster.js';
import { TEST_TIMEOUT_MS } from '../helpers/redis-server.js';

const available = redisAvailable();
const KEYS = Array.from({ length: 60 }, (_, i) => `user:${i}`);
const TIMEOUT_MS = 1_000;
const ATTEMPTS = 3;
const kill = (cluster: TestCluster, i: number, signal: string) => (cluster.processes[i] as { kill(signal: string): boolean }).kill(signal);

describe.skipIf(!available)('breakers per primary on a Cluster', () => {
  let cluster: TestCluster;
  let n = 0;

  beforeAll(async () => {
    cluster = await startCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  /** The index of the primary that serves `key`'s state under `prefix`. */
  const primaryOf = (prefix: string, key: string): number => {
    const slot = keySlot(`${keyBase(prefix, key)}x`); // the hash tag decides: any suffix will do
    return cluster.nodes.indexOf(cluster.nodeOfSlot(slot));
  };

  /** Each key once, all at once: which answers were degraded. */
  const round = async (limiter: RedisRateLimiter): Promise<Set<string>> => {
    const ds = await Promise.all(KEYS.map((k) => limiter.tryAcquire(k)));
    return new Set(KEYS.filter((_, i) => ds[i]?.degraded === true));
  };

  /**
   * `rounds` rounds with a primary stopped: the keys of `onStopped` degraded in every one (an
   * assertion), and the breaker seen open after one of them at least (after its cooldown it is
   * half open, and reads as closed until the probe fails, so a single look after a slow round
   * may miss it). Returns how many answers for other keys were degraded (0: a clean run).
   */
  const stoppedRounds = async (limiter: RedisRateLimiter, onStopped: Set<string>, rounds: number, keys = KEYS): Promise<number> => {
    let others = 0;
    let opened = false;
    for (let r = 0; r < rounds; r++) {
      const degraded = await round(limiter);
      if (limiter.breakerOpen) opened = true;
      for (const k of onStopped) expect(degraded.has(k), `round ${r}: ${k} on the stopped primary`).toBe(true);
      others += keys.filter((k) => degraded.has(k) && !onStopped.has(k)).length;
    }
    expect(opened, 'the stopped primary\'s breaker was never seen open').toBe(true);
    return others;
  };

  it.each(['ioredis', 'node-redis'] as const)('%s: a stopped primary degrades only its own keys, and they come back when it does', async (client) => {
    for (let attempt = 1; ; attempt++) {
      const redis = client === 'ioredis' ? await cluster.ioredis() : await cluster.nodeRedis();
      const prefix = `brk${n++}:`;
      const limiter = new RedisRateLimiter({ prefixCheck: 'off', redis, prefix, localTier: false, limit: perSecond(1_000), onError: 'allow', timeoutMs: TIMEOUT_MS });
      const stopped = 2;
      const onStopped = new Set(KEYS.filter((k) => primaryOf(prefix, k) === stopped));
      expect(onStopped.size).toBeGreaterThan(5);
      expect(onStopped.size).toBeLessThan(KEYS.length - 5);
      let others = 0;
      try {
        others += (await round(limiter)).size; // every primary up
        kill(cluster, stopped, 'SIGSTOP');
        // Enough rounds for that primary's breaker to open (3 failures) and stay open.
        others += await stoppedRounds(limiter, onStopped, 4);
        kill(cluster, stopped, 'SIGCONT');
        // Past the cooldown one probe goes, and its answer closes the breaker: Redis decides again.
        let back = false;
        for (let i = 0; i < 200 && !back; i++) {
          back = (await round(limiter)).size === 0;
          if (!back) await new Promise((res) => setTimeout(res, 25));
        }
        expect(back).toBe(true);
        expect(limiter.breakerOpen).toBe(false);
      } finally {
        kill(cluster, stopped, 'SIGCONT');
        if ('disconnect' in redis && typeof redis.disconnect === 'function') await redis.disconnect();
      }
      if (others === 0) return;
      expect(attempt, `${others} answers for keys of healthy primaries degraded in each of ${ATTEMPTS} runs`).toBeLessThan(ATTEMPTS);
    }
  }, 120_000);

  it('with the cap on a healthy primary, a stopped key primary degrades only its keys, and their cap spends come back', async () => {
    for (let attempt = 1; ; attempt++) {
      const redis = await cluster.ioredis();
      const prefix = `brc${n++}:`;
      const cap = perMinute(10_000);
      const limiter = new RedisRateLimiter({ prefixCheck: 'off', redis, prefix, localTier: false, limit: perSecond(1_000), globalLimit: cap, onError: 'allow', timeoutMs: TIMEOUT_MS });
      // The cap's key is the prefix's own: find a primary other than the cap's to stop.
      const probe = new RedisRateLimiter({ timeoutMs: TEST_TIMEOUT_MS, prefixCheck: 'off', redis, prefix, localTier: false, limit: perSecond(1_000_000), globalLimit: cap });
      const capPrimary = cluster.nodes.indexOf(cluster.nodeOfSlot(keySlot(globalKey(prefix, '0/1'))));
      const stopped = (capPrimary + 1) % cluster.nodes.length;
      const onStopped = new Set(KEYS.filter((k) => primaryOf(prefix, k) === stopped));
      let others: number;
      try {
        kill(cluster, stopped, 'SIGSTOP');
        const rounds = 4;
        others = await stoppedRounds(limiter, onStopped, rounds);
        // Every cap spend of a key that was not decided comes back (fire-and-forget refunds): the
        // cap holds what the other keys spent, at most.
        const spent = rounds * (KEYS.length - onStopped.size);
        // A probe of a key on a primary that is up (its remaining is the cap's: the key's is 1,000,000).
        const probeKey = Array.from({ length: 100 }, (_, i) => `probe:${i}`).find((k) => primaryOf(prefix, k) !== stopped) as string;
        let left = -1;
        for (let i = 0; i < 100 && left < cap.permits - spent; i++) {
          left = (await probe.tryAcquire(probeKey, 0)).remaining;
          if (left < cap.permits - spent) await new Promise((res) => setTimeout(res, 20));
        }
        // The cap refills meanwhile (about 1 a 6 ms): at least what it would hold, never less.
        expect(left).toBeGreaterThanOrEqual(cap.permits - spent);
      } finally {
        kill(cluster, stopped, 'SIGCONT');
        redis.disconnect();
      }
      if (others === 0) return;
      expect(attempt, `${others} answers for keys of healthy primaries degraded in each of ${ATTEMPTS} runs`).toBeLessThan(ATTEMPTS);
    }
  }, 120_000);

  it('a slot moved to another primary takes its keys to that primary\'s breaker (MOVED): stopping the old one does not degrade them', async () => {
    // The breaker of a decision is looked up from the client's slot table at each decision, so
    // after a resharding (the client follows MOVED and learns the new owner) a moved key answers
    // by its new primary's breaker, and its old primary's outage no longer degrades it.
    const direct = new Map<number, Redis>();
    const ids = new Map<number, string>();
    for (const node of cluster.nodes) {
      const r = new Redis({ host: node.host, port: node.port });
      direct.set(node.port, r);
      ids.set(node.port, String(await r.call('CLUSTER', 'MYID')));
    }
    const at = (node: ClusterNode) => direct.get(node.port) as Redis;
    /** The port of the primary that `from`'s own slot table names for `slot`, read before the test stops anything. */
    let nodeOfSlotNow = (_slot: number): number => from.port;
    /** Moves `slot`, with its keys, from node `a` to node `b`, telling every node. */
    const move = async (slot: number, a: ClusterNode, b: ClusterNode) => {
      await at(b).call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids.get(a.port) as string);
      await at(a).call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids.get(b.port) as string);
      const keys = (await at(a).call('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[];
      if (keys.length > 0) await at(a).call('MIGRATE', b.host, b.port, '', 0, 5000, 'KEYS', ...keys);
      for (const node of [b, a, ...cluster.nodes.filter((x) => x !== a && x !== b)]) {
        await at(node).call('CLUSTER', 'SETSLOT', slot, 'NODE', ids.get(b.port) as string);
      }
    };
    const stopped = 0;
    const from = cluster.nodes[stopped] as ClusterNode;
    const to = cluster.nodes[1] as ClusterNode;
    const redis = await cluster.ioredis();
    const prefix = `brm${n++}:`;
    // A key's state lives 36 s after an admission: none expires while its slot moves (a key past
    // its expiry that Redis has not removed yet is not migrated, and keeps the slot from moving).
    const limiter = new RedisRateLimiter({ prefixCheck: 'off', redis, prefix, localTier: false, limit: perHour(100), onError: 'allow', timeoutMs: TIMEOUT_MS });
    // A key of a slot of its own, which no other test's keys share.
    const slotOfKey = (k: string) => keySlot(`${keyBase(prefix, k)}x`);
    const taken = new Set([...KEYS, ...Array.from({ length: 100 }, (_, i) => `probe:${i}`)].map(slotOfKey));
    const moved = Array.from({ length: 1000 }, (_, i) => `moved:${i}`).find((k) => primaryOf(prefix, k) === stopped && !taken.has(slotOfKey(k))) as string;
    const slot = slotOfKey(moved);
    const stay = new Set(KEYS.filter((k) => primaryOf(prefix, k) === stopped));
    expect(stay.size).toBeGreaterThan(5);
    try {
      expect((await limiter.tryAcquire(moved)).degraded).toBeUndefined(); // the client learns the slot's owner
      await move(slot, from, to);
      nodeOfSlotNow = () => to.port;
      // The next call meets MOVED, follows it, and the client's slot table says `to` from then on.
      expect((await limiter.tryAcquire(moved)).degraded).toBeUndefined();
      // ioredis refreshes its whole slot table after a MOVED, asking nodes in random order: let
      // that finish before the stop. Without this wait, 2 runs of 12 saw the moved key's call to
      // its healthy primary wait out its deadline in the round after the stop (a refresh asking
      // the stopped node waits 1 s for it); with it, none of 24.
      await new Promise<void>((resolve) => (redis as unknown as { refreshSlotsCache(done: () => void): void }).refreshSlotsCache(() => resolve()));
      kill(cluster, stopped, 'SIGSTOP');
      // The keys left on the stopped primary degrade (its breaker opens); the moved key never does.
      // The breaker is looked at after every round, as stoppedRounds does: after its cooldown it is
      // half open and reads as closed until its probe fails, so a single look after the last round
      // missed it once in a full quiet run (2026-12-07).
      let opened = false;
      for (let r = 0; r < 4; r++) {
        const [degraded, d] = await Promise.all([round(limiter), limiter.tryAcquire(moved)]);
        if (limiter.breakerOpen) opened = true;
        expect(d.degraded, `round ${r}: the moved key degraded`).toBeUndefined();
        for (const k of stay) expect(degraded.has(k), `round ${r}: ${k} on the stopped primary`).toBe(true);
      }
      expect(opened, 'the stopped primary\'s breaker was never seen open').toBe(true);
    } finally {
      kill(cluster, stopped, 'SIGCONT');
      // Back where nodeOfSlot says it is, for the other tests (if it moved: an error before that
      // must not be hidden by this one).
      if (nodeOfSlotNow(slot) === to.port) await move(slot, to, from);
      redis.disconnect();
      for (const r of direct.values()) r.disconnect();
    }
  }, 120_000);
});
