// Redis Cluster below the limiter, against a real three-primary cluster started by the test:
// keySlot agrees with the server, and both cluster clients send a script (and the clock reading)
// to the node serving its keys, load the script there when that node lacks it, and follow the
// slot when it moves. The script here is a small one of the tests' own (the limiter's scripts are
// tested with the limiters): it adds to each of its keys and answers the node's clock.
import { Buffer } from 'node:buffer';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { Cluster, Redis } from 'ioredis';
import { createCluster } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisCommands, TIME_SHA, type RedisCommands } from '../../src/redis/client.js';
import { keySlot, keySlotOfBytes } from '../../src/redis/key-slot.js';
import { groupBySlot } from '../../src/redis/slot-groups.js';
import { redisAvailable, startCluster, type ClusterNode, type NodeRedisCluster, type TestCluster } from '../helpers/redis-cluster.js';
import { mulberry32 } from '../helpers/random.js';

const available = redisAvailable();

/** Adds ARGV[1] to each key; answers the new counts, then the node's TIME in µs. */
const SCRIPT = `
local out = {}
for i = 1, #KEYS do out[i] = redis.call('INCRBY', KEYS[i], ARGV[1]) end
local t = redis.call('TIME')
out[#out + 1] = tonumber(t[1]) * 1000000 + tonumber(t[2])
return out
`;
const SCRIPT_SHA = createHash('sha1').update(SCRIPT).digest('hex');

/** The slot as the Redis Cluster specification computes it, on the bytes Buffer.from gives. */
function referenceSlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close !== -1 && close !== open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc ^= (bytes[i] as number) << 8;
    for (let b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

/** Keys of every shape the hash-tag rule distinguishes, with non-ASCII and lone surrogates. */
function randomKeys(count: number): string[] {
  const next = mulberry32(20240611);
  const pieces = ['{', '}', '{}', 'a', 'user:', '42', 'é', '日本', '😀', '\u{10ffff}', '\ud800', '\udfff', '%7B', ' ', ':'];
  const keys: string[] = [];
  for (let i = 0; i < count; i++) {
    let k = '';
    const n = Math.floor(next() * 8);
    for (let j = 0; j < n; j++) k += pieces[Math.floor(next() * pieces.length)];
    keys.push(k);
  }
  return keys;
}

describe('keySlot', () => {
  it('gives the slots the Redis Cluster specification gives', () => {
    // The specification's check value: CRC16/XMODEM("123456789") is 0x31C3.
    expect(keySlot('123456789')).toBe(0x31c3);
    expect(keySlot('')).toBe(0);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('bar')).toBe(5061);
    expect(keySlot('hello')).toBe(866);
    // The hash tag: the first '{', the first '}' after it, something between them.
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('{user1000}.followers')).toBe(keySlot('user1000'));
    expect(keySlot('foo{}{bar}')).toBe(referenceSlot('foo{}{bar}'));
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
    expect(keySlot('foo{bar}{zap}')).toBe(keySlot('bar'));
    expect(keySlot('}{x}')).toBe(keySlot('x'));
    expect(keySlot('{x')).toBe(referenceSlot('{x'));
    // UTF-8: two, three and four bytes, and a lone surrogate sent as U+FFFD.
    expect(keySlot('é')).toBe(referenceSlot('é'));
    expect(keySlot('{日本}:0')).toBe(keySlot('日本'));
    expect(keySlot('😀')).toBe(referenceSlot('😀'));
    expect(keySlot('a\ud800b')).toBe(keySlot('a\ufffdb'));
    expect(keySlot('\udc00\ud800')).toBe(keySlot('\ufffd\ufffd'));
  });

  it('agrees with the specification on any string, including lone surrogates', () => {
    const unit = fc.oneof(
      fc.constantFrom('{', '}', 'a', 'é', '😀', '\ud83d', '\ude00'),
      fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
    );
    fc.assert(fc.property(fc.string({ unit, maxLength: 24 }), (key) => {
      expect(keySlot(key)).toBe(referenceSlot(key));
      expect(keySlotOfBytes(Buffer.from(key))).toBe(referenceSlot(key));
    }), { seed: 7, numRuns: 2000 });
  });

  it('refuses what is not a string, naming it', () => {
    expect(() => keySlot(42 as never)).toThrow(new TypeError('key must be a string, got 42'));
    expect(() => keySlotOfBytes('k' as never)).toThrow(new TypeError('key must be a Uint8Array, got "k"'));
  });
});

describe('groupBySlot', () => {
  it('groups by slot in order of first arrival, keeping arrival order within each group', () => {
    const items = ['a1', 'b1', 'a2', 'c1', 'b2', 'a3'];
    const slot = (s: string) => s.charCodeAt(0);
    expect(groupBySlot(items, slot)).toEqual([['a1', 'a2', 'a3'], ['b1', 'b2'], ['c1']]);
    expect(groupBySlot([], slot)).toEqual([]);
    expect(items).toEqual(['a1', 'b1', 'a2', 'c1', 'b2', 'a3']);
  });

  it('refuses a slot that is not one, naming it', () => {
    expect(() => groupBySlot(['k'], () => 16384)).toThrow(new RangeError('slotOf(item) must return an integer slot from 0 to 16383, got 16384'));
    expect(() => groupBySlot(['k'], () => 1.5)).toThrow(RangeError);
  });
});

describe('redisCommands with a cluster client (no server needed)', () => {
  it('knows both cluster clients, and refuses a call it cannot route', async () => {
    const io = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    const node = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] });
    try {
      for (const client of [io, node]) {
        const r = redisCommands(client);
        expect(r.cluster).toBe(true);
        expect(r.slotOf('{user}:0')).toBe(keySlot('user'));
        await expect(r.evalScript(SCRIPT_SHA, SCRIPT, [], [1])).rejects.toThrow(new RangeError('keys must hold at least one key on a Redis Cluster (a script is sent to the node serving its keys), got none'));
        await expect(r.time()).rejects.toThrow(new TypeError('routingKey must be a string on a Redis Cluster (each node has its own clock: the one serving that key is read), got undefined'));
      }
      // ioredis prefixes a script's keys with its keyPrefix: the slot is the prefixed key's.
      const prefixed = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true, keyPrefix: '{p}' });
      expect(redisCommands(prefixed).slotOf('{user}:0')).toBe(keySlot('p'));
      prefixed.disconnect();
      const standalone = new Redis({ lazyConnect: true });
      expect(redisCommands(standalone).cluster).toBe(false);
      expect(redisCommands(standalone).slotOf('{user}:0')).toBe(0);
      standalone.disconnect();
    } finally {
      io.disconnect();
    }
  });
});

/** A user key's limit key as the limiter names it: the user key is the hash tag. */
const limitKey = (prefix: string, user: string, index: number) => `${prefix}{${user}}:${index}`;
/** The global cap's key: no hash tag, so it lands wherever its whole name hashes. */
const globalKey = (prefix: string) => `${prefix}global:0`;

type Client = { name: string; make(c: TestCluster): Promise<unknown>; close(client: unknown): Promise<void> };
const clients: Client[] = [
  {
    name: 'ioredis Cluster',
    make: (c) => c.ioredis(),
    async close(client) {
      (client as Cluster).disconnect();
    },
  },
  {
    name: 'node-redis createCluster',
    make: (c) => c.nodeRedis(),
    async close(client) {
      await (client as NodeRedisCluster).close();
    },
  },
];

describe.skipIf(!available)('Redis Cluster', () => {
  let cluster: TestCluster;
  /** A plain connection to each node, to look at what it holds. */
  const direct = new Map<number, Redis>();
  const ids = new Map<number, string>();
  let n = 0;
  /** A fresh prefix, so tests never share keys. */
  const prefix = () => `c${n++}:`;

  const at = (node: ClusterNode) => direct.get(node.port) as Redis;
  const ownerOf = (key: string) => cluster.nodeOfSlot(keySlot(key));
  const flushScripts = () => Promise.all(cluster.nodes.map((node) => at(node).call('SCRIPT', 'FLUSH')));
  /** The ports of the nodes that hold `sha` in their script cache. */
  const cachedOn = async (sha: string) => {
    const found: number[] = [];
    for (const node of cluster.nodes) if (((await at(node).call('SCRIPT', 'EXISTS', sha)) as number[])[0] === 1) found.push(node.port);
    return found;
  };
  /** A key that `node` serves, its hash tag made of the prefix too (so of no other test). */
  const keyOn = (node: ClusterNode, p: string) => {
    for (let i = 0; ; i++) if (ownerOf(limitKey(p, `${p}${i}`, 0)) === node) return limitKey(p, `${p}${i}`, 0);
  };

  beforeAll(async () => {
    cluster = await startCluster();
    for (const node of cluster.nodes) {
      const r = new Redis({ host: node.host, port: node.port });
      direct.set(node.port, r);
      ids.set(node.port, String(await r.call('CLUSTER', 'MYID')));
    }
  });
  afterAll(async () => {
    for (const r of direct.values()) r.disconnect();
    await cluster?.stop();
  });

  it('serves a third of the slots on each node, as nodeOfSlot says', async () => {
    const keys = ['{a}', '{b}', '{c}', 'foo', 'bar', 'hello'];
    for (const key of keys) {
      const owner = ownerOf(key);
      for (const node of cluster.nodes) {
        const get = at(node).call('GET', key);
        if (node === owner) await expect(get).resolves.toBeNull();
        else await expect(get).rejects.toThrow(`MOVED ${keySlot(key)} ${owner.host}:${owner.port}`);
      }
    }
    expect(new Set(keys.map((k) => ownerOf(k).port)).size).toBe(3);
  });

  describe.each(clients)('through $name', (client) => {
    let raw: unknown;
    let redis: RedisCommands;

    beforeAll(async () => {
      raw = await client.make(cluster);
      redis = redisCommands(raw);
    });
    afterAll(async () => {
      await client.close(raw);
    });

    it('keySlot agrees with CLUSTER KEYSLOT on 400 keys with braces and non-ASCII', async () => {
      const keys = randomKeys(400);
      const c = raw;
      const send = c instanceof Cluster
        ? (k: string) => c.call('CLUSTER', 'KEYSLOT', k)
        : (k: string) => (c as NodeRedisCluster).sendCommand(undefined, true, ['CLUSTER', 'KEYSLOT', k]);
      const slots = await Promise.all(keys.map(send));
      expect(slots.map(Number)).toEqual(keys.map(keySlot));
      expect(new Set(slots).size).toBeGreaterThan(100);
    });

    it('sends a script to the node serving its keys, loading it there after SCRIPT FLUSH', async () => {
      const p = prefix();
      for (const node of cluster.nodes) {
        const key = keyOn(node, p);
        const keys = [key, key.replace(/:0$/, ':1')];
        await flushScripts();
        // NOSCRIPT on that node, then EVAL there.
        const first = (await redis.evalScript(SCRIPT_SHA, SCRIPT, keys, [1])) as number[];
        expect(first.slice(0, 2).map(Number)).toEqual([1, 1]);
        expect(Math.abs(Number(first[2]) - Date.now() * 1000)).toBeLessThan(1e6);
        expect(await cachedOn(SCRIPT_SHA)).toEqual([node.port]);
        for (const k of keys) expect(await at(node).call('GET', k)).toBe('1');
        // EVALSHA finds it now.
        const second = (await redis.evalScript(SCRIPT_SHA, SCRIPT, keys, [2])) as number[];
        expect(second.slice(0, 2).map(Number)).toEqual([3, 3]);
        expect(await cachedOn(SCRIPT_SHA)).toEqual([node.port]);
      }
    });

    it('reads the clock of the node serving the routing key', async () => {
      const p = prefix();
      for (const node of cluster.nodes) {
        const key = keyOn(node, p);
        await flushScripts();
        const us = await redis.time(key);
        expect(Number.isInteger(us)).toBe(true);
        expect(Math.abs(us - Date.now() * 1000)).toBeLessThan(1e6);
        // The reading script ran there and nowhere else.
        expect(await cachedOn(TIME_SHA)).toEqual([node.port]);
        // And again, by EVALSHA this time.
        expect(Math.abs((await redis.time(key)) - Date.now() * 1000)).toBeLessThan(1e6);
      }
    });

    it('runs one call per slot group for keys spread over all three nodes', async () => {
      const p = prefix();
      // Each of 60 users twice, in arrival order: the second of each pair counts 2.
      const users = Array.from({ length: 60 }, (_, i) => `user:${i}`).flatMap((u) => [u, u]);
      const groups = groupBySlot(users, (u) => redis.slotOf(limitKey(p, u, 0)));
      expect(new Set(groups.map((g) => ownerOf(limitKey(p, g[0] as string, 0)).port)).size).toBe(3);
      const replies = await Promise.all(groups.map((g) => redis.evalScript(SCRIPT_SHA, SCRIPT, g.map((u) => limitKey(p, u, 0)), [1]) as Promise<number[]>));
      replies.forEach((reply, j) => {
        const g = groups[j] as string[];
        expect(reply.slice(0, g.length).map(Number)).toEqual(g.map((u, i) => g.slice(0, i + 1).filter((v) => v === u).length));
      });
      for (const u of new Set(users)) expect(await at(ownerOf(limitKey(p, u, 0))).call('GET', limitKey(p, u, 0))).toBe('2');
    });

    it('sends a call whose one key has no hash tag (the global cap) to the node serving it', async () => {
      const key = globalKey(prefix());
      expect(((await redis.evalScript(SCRIPT_SHA, SCRIPT, [key], [1])) as number[])[0]).toBe(1);
      expect(await at(ownerOf(key)).call('GET', key)).toBe('1');
    });

    it('passes on CROSSSLOT when the keys of one call are in two slots', async () => {
      const p = prefix();
      const keys = [limitKey(p, 'a', 0), limitKey(p, 'b', 0)];
      expect(keySlot(keys[0] as string)).not.toBe(keySlot(keys[1] as string));
      await expect(redis.evalScript(SCRIPT_SHA, SCRIPT, keys, [1])).rejects.toThrow(/CROSSSLOT/);
    });

    it('follows ASK while a slot migrates and MOVED once it has moved, loading the script where it lands', async () => {
      const p = prefix();
      const from = cluster.nodes[0] as ClusterNode;
      const to = cluster.nodes[1] as ClusterNode;
      const key = keyOn(from, p);
      const slot = keySlot(key);
      /** Moves `slot`, with its keys, from node `a` to node `b`; `midway` runs while it migrates. */
      const move = async (a: ClusterNode, b: ClusterNode, midway: () => Promise<void>) => {
        await at(b).call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids.get(a.port) as string);
        await at(a).call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids.get(b.port) as string);
        // A node gives a slot away only once it holds none of its keys.
        const keys = (await at(a).call('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[];
        await at(a).call('MIGRATE', b.host, b.port, '', 0, 5000, 'KEYS', ...keys);
        await midway();
        for (const node of [b, a, ...cluster.nodes.filter((x) => x !== a && x !== b)]) {
          await at(node).call('CLUSTER', 'SETSLOT', slot, 'NODE', ids.get(b.port) as string);
        }
      };
      expect(((await redis.evalScript(SCRIPT_SHA, SCRIPT, [key], [1])) as number[])[0]).toBe(1);
      try {
        await move(from, to, async () => {
          // The client still sends to `from`, which lacks the key now: ASK, to `to`, which has
          // never seen the script either (NOSCRIPT there, then EVAL, asked again).
          await flushScripts();
          expect(((await redis.evalScript(SCRIPT_SHA, SCRIPT, [key], [1])) as number[])[0]).toBe(2);
          expect(await cachedOn(SCRIPT_SHA)).toEqual([to.port]);
        });
        // The slot is `to`'s now: MOVED, and the client learns the new map.
        await flushScripts();
        expect(((await redis.evalScript(SCRIPT_SHA, SCRIPT, [key], [1])) as number[])[0]).toBe(3);
        expect(await at(to).call('GET', key)).toBe('3');
        expect(Math.abs((await redis.time(key)) - Date.now() * 1000)).toBeLessThan(1e6);
        expect(await cachedOn(TIME_SHA)).toEqual([to.port]);
      } finally {
        // Back where nodeOfSlot says it is, for the other tests.
        await move(to, from, async () => {});
      }
      expect(((await redis.evalScript(SCRIPT_SHA, SCRIPT, [key], [1])) as number[])[0]).toBe(4);
      expect(await at(from).call('GET', key)).toBe('4');
    });
  });

  it("ioredis's keyPrefix moves keys, and slotOf follows it; node-redis's raw path sends keys as they are", async () => {
    const io = await cluster.ioredis({ keyPrefix: '{pfx}' });
    const node = await cluster.nodeRedis({ keyPrefix: '{pfx}' });
    try {
      const key = limitKey(prefix(), 'user:1', 0);
      const viaIo = redisCommands(io);
      expect(viaIo.slotOf(key)).toBe(keySlot('pfx'));
      expect(((await viaIo.evalScript(SCRIPT_SHA, SCRIPT, [key], [1])) as number[])[0]).toBe(1);
      expect(await at(cluster.nodeOfSlot(keySlot('pfx'))).call('GET', `{pfx}${key}`)).toBe('1');
      const viaNode = redisCommands(node);
      expect(viaNode.slotOf(key)).toBe(keySlot(key));
      expect(((await viaNode.evalScript(SCRIPT_SHA, SCRIPT, [key], [1])) as number[])[0]).toBe(1);
      expect(await at(ownerOf(key)).call('GET', key)).toBe('1');
    } finally {
      io.disconnect();
      await node.close();
    }
  });
});
