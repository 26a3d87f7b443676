// A private Redis Cluster for the tests: three primaries, no replicas, on free TCP ports of
// 127.0.0.1 (each port + 10000 free too, for the cluster bus), their files in a temporary folder,
// no persistence; killed and removed after. The same rule as test/helpers/redis-server.ts: outside
// CI a machine without redis-server skips the tests and says so loudly, under CI that is a failure
// (`redisAvailable()`, re-exported here).
//
// The cluster is assembled the way `redis-cli --cluster create ... --cluster-replicas 0` does it
// (each primary takes a third of the slots and its own config epoch, then they meet), but by
// hand: redis-cli polls once a second for the nodes to agree, and they learn of each other by
// gossip, which made a start take 2 to 15 s. Here every pair meets directly and the state is
// polled every 25 ms: a start takes about 2 s, the delay a primary waits after it starts before
// it reports the cluster ok.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis, type ClusterOptions } from 'ioredis';
import { createCluster } from 'redis';
import { processGroup } from './process-group.js';

export { redisAvailable } from './redis-server.js';

const HOST = '127.0.0.1';
/** A node's cluster bus listens on its port plus this (Redis's fixed offset). */
export const BUS_OFFSET = 10_000;
const PRIMARIES = 3;
/**
 * Where the test helpers pick TCP ports, [from, to): every port and every cluster bus port below
 * Linux's ephemeral range (32768 and up), where an outgoing connection of any test may take a port
 * as its own between a probe and a bind (found: a cluster node's bus port taken so, "Address
 * already in use", on a busy run of the whole suite); and the ranges apart, so that a cluster and a
 * Sentinel set started at once by two test files never probe the same port.
 */
export const PORT_RANGES = {
  cluster: { from: 10_000, to: 16_000 }, // their buses: 20,000 to 25,999
  sentinel: { from: 26_000, to: 32_000 },
} as const;
/** Starts of a cluster that lost a port it had probed free to another process before binding it. */
const START_TRIES = 3;

/** A port of `range`, drawn at random. */
export function drawPort(range: { from: number; to: number }): number {
  return range.from + Math.floor(Math.random() * (range.to - range.from));
}

export interface ClusterNode {
  host: string;
  port: number;
}

export interface TestCluster {
  /** The primaries, in the order they were started; node i serves the i-th third of the slots. */
  nodes: ClusterNode[];
  /** The primary that serves `slot` (as the cluster was created: nothing here moves slots). */
  nodeOfSlot(slot: number): ClusterNode;
  /** The server process of each node, in the order of `nodes` (for SIGSTOP or SIGKILL). */
  processes: ChildProcess[];
  /** A connected ioredis `Cluster` over these nodes; `options` are passed on. */
  ioredis(options?: ClusterOptions): Promise<Cluster>;
  /** A connected node-redis cluster over these nodes, with `keyPrefix` if given. */
  nodeRedis(options?: { keyPrefix?: string }): Promise<NodeRedisCluster>;
  /** Kills every node with SIGKILL and removes the folder. */
  stop(): Promise<void>;
}

function nodeRedisCluster(nodes: ClusterNode[], options: { keyPrefix?: string }) {
  return createCluster({ rootNodes: nodes.map((n) => ({ socket: { host: n.host, port: n.port } })), ...options });
}

/** node-redis's cluster client, as `nodeRedis()` makes it. */
export type NodeRedisCluster = ReturnType<typeof nodeRedisCluster>;

/** The first slot of primary `i`: the slots are split in thirds, as redis-cli splits them. */
function firstSlot(i: number): number {
  return Math.round((16384 * i) / PRIMARIES);
}

/** Whether `port` can be bound on 127.0.0.1 right now (also for the Sentinel set-up). */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, HOST, () => s.close(() => resolve(true)));
  });
}

/**
 * `count` ports that are free, with their bus ports free too, and none another's bus port.
 * Another process may take one before its node binds it; that node then exits, and
 * `startCluster` tries again with new ports.
 */
async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let tries = 0; ports.length < count; tries++) {
    if (tries > 1000) throw new Error(`found only ${ports.length} of ${count} free port pairs (port and port + ${BUS_OFFSET}) on ${HOST}`);
    const port = drawPort(PORT_RANGES.cluster);
    if (ports.some((p) => p === port || Math.abs(p - port) === BUS_OFFSET)) continue;
    if (await portFree(port) && await portFree(port + BUS_OFFSET)) ports.push(port);
  }
  return ports;
}

function launch(dir: string, port: number, index: number): { child: ChildProcess; output: () => string } {
  const child = spawn('redis-server', [
    '--port', String(port), '--bind', HOST,
    '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${index}.conf`),
    '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d) => { out += String(d); });
  child.stderr?.on('data', (d) => { out += String(d); });
  return { child, output: () => out };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every 25 ms until it is true, failing after `ms` with `what`. */
export async function until(what: string, ms: number, check: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * Starts three primaries, makes them a cluster and waits until every node reports it ok. A start
 * whose node lost a port to another process between its probe and its bind is stopped and tried
 * again with new ports, up to START_TRIES times.
 */
export async function startCluster(): Promise<TestCluster> {
  for (let tries = 1; ; tries++) {
    try {
      return await startOnce();
    } catch (e) {
      if (tries >= START_TRIES || !String((e as Error).message).includes('Address already in use')) throw e;
    }
  }
}

async function startOnce(): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cluster-'));
  // Should the test process die without stop(), the nodes must not outlive it.
  const group = processGroup(dir);
  const children = group.children;
  const admins: Redis[] = [];
  const stop = (): Promise<void> => group.stop(() => { for (const a of admins) a.disconnect(); });
  try {
    const ports = await freePorts(PRIMARIES);
    const nodes = ports.map((port) => ({ host: HOST, port }));
    const launched = ports.map((port, i) => launch(dir, port, i));
    for (const l of launched) children.push(l.child);
    const failed = new Promise<never>((_, reject) => {
      for (const l of launched) l.child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) while the cluster started: ${l.output()}`)));
    });
    failed.catch(() => {}); // a node that exits later is the test's business
    const assemble = async () => {
      // One plain connection per node, retrying every 20 ms until the node listens.
      for (const n of nodes) {
        const a = new Redis({ host: n.host, port: n.port, retryStrategy: () => 20, maxRetriesPerRequest: null });
        a.on('error', () => {}); // refused until the node listens; its commands wait meanwhile
        admins.push(a);
      }
      await Promise.all(admins.map((a, i) => a.call('CLUSTER', 'ADDSLOTSRANGE', firstSlot(i), firstSlot(i + 1) - 1)));
      // Distinct epochs, so the nodes need not settle a collision before they agree.
      await Promise.all(admins.map((a, i) => a.call('CLUSTER', 'SET-CONFIG-EPOCH', i + 1)));
      // Every pair meets directly: learning of a node through gossip takes a second or more.
      await Promise.all(admins.flatMap((a, i) => nodes.slice(i + 1).map((n) => a.call('CLUSTER', 'MEET', n.host, n.port))));
      await Promise.all(admins.map((a, i) => until(`cluster_state:ok on port ${ports[i]}`, 20_000, async () => {
        const info = String(await a.call('CLUSTER', 'INFO'));
        return info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${PRIMARIES}`) && info.includes('cluster_slots_ok:16384');
      })));
    };
    await Promise.race([assemble(), failed]);
    for (const a of admins) a.disconnect();
    admins.length = 0;
    return {
      nodes,
      nodeOfSlot(slot) {
        if (!Number.isInteger(slot) || slot < 0 || slot > 16383) throw new RangeError(`slot must be an integer from 0 to 16383, got ${slot}`);
        let i = PRIMARIES - 1;
        while (slot < firstSlot(i)) i--;
        return nodes[i] as ClusterNode;
      },
      processes: children,
      async ioredis(options = {}) {
        const c = new Cluster(nodes, options);
        await new Promise<void>((resolve, reject) => {
          c.once('ready', () => resolve());
          c.once('error', reject);
        });
        return c;
      },
      async nodeRedis(options = {}) {
        const c = nodeRedisCluster(nodes, options);
        c.on('error', () => {}); // a test that stops a node sees the errors in its calls
        await c.connect();
        return c;
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
