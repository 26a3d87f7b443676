// A private primary, one replica and one Sentinel watching them, on 127.0.0.1 TCP ports (Sentinel
// announces addresses, so no unix sockets), no persistence; killed and removed after. For the
// failover tests: the Sentinel is quick to act (the primary is down after 300 ms unanswered).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { drawPort, PORT_RANGES, portFree, until } from './redis-cluster.js';
import { processGroup } from './process-group.js';

const HOST = '127.0.0.1';
/** The name the Sentinel monitors the primary under. */
export const SENTINEL_NAME = 'sluice';

export interface SentinelSet {
  primaryPort: number;
  replicaPort: number;
  sentinelPort: number;
  /** The processes, for SIGSTOP, SIGCONT and SIGKILL. */
  primary: ChildProcess;
  replica: ChildProcess;
  /** An ioredis client that finds the primary through the Sentinel (and follows a failover). */
  client(): Redis;
  /** A direct client of one server, for INFO and TIME. */
  direct(port: number): Redis;
  /** Waits until the Sentinel names `port` as the primary. */
  awaitPrimary(port: number, ms: number): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(taken: number[]): Promise<number> {
  for (let tries = 0; tries < 1000; tries++) {
    const port = drawPort(PORT_RANGES.sentinel);
    if (!taken.includes(port) && await portFree(port)) return port;
  }
  throw new Error('no free port on 127.0.0.1');
}

function serve(args: string[]): ChildProcess {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.resume();
  child.stderr?.resume();
  return child;
}

/** Starts the primary, the replica (synced) and the Sentinel (watching both). */
export async function startSentinelSet(): Promise<SentinelSet> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-'));
  const ports: number[] = [];
  for (let i = 0; i < 3; i++) ports.push(await freePort(ports));
  const [primaryPort, replicaPort, sentinelPort] = ports as [number, number, number];
  const common = ['--bind', HOST, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning', '--dir', dir];
  const primary = serve(['--port', String(primaryPort), ...common]);
  const replica = serve(['--port', String(replicaPort), ...common, '--replicaof', HOST, String(primaryPort)]);
  const config = join(dir, 'sentinel.conf');
  writeFileSync(config, [
    `port ${sentinelPort}`, `bind ${HOST}`, `dir ${dir}`,
    `sentinel monitor ${SENTINEL_NAME} ${HOST} ${primaryPort} 1`,
    `sentinel down-after-milliseconds ${SENTINEL_NAME} 300`,
    `sentinel failover-timeout ${SENTINEL_NAME} 3000`,
    '',
  ].join('\n'));
  const group = processGroup(dir);
  const children = group.children;
  children.push(primary, replica);
  const clients: Redis[] = [];
  const direct = (port: number): Redis => {
    const c = new Redis({ host: HOST, port, maxRetriesPerRequest: 1, lazyConnect: false });
    c.on('error', () => {}); // a test that kills a server sees the errors in its calls
    clients.push(c);
    return c;
  };
  const set: SentinelSet = {
    primaryPort, replicaPort, sentinelPort, primary, replica,
    client() {
      const c = new Redis({ sentinels: [{ host: HOST, port: sentinelPort }], name: SENTINEL_NAME });
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    direct,
    async awaitPrimary(port, ms) {
      const s = direct(sentinelPort);
      await until(`the Sentinel to name port ${port} the primary`, ms, async () => {
        const at = (await s.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_NAME)) as string[] | null;
        return at?.[1] === String(port);
      });
    },
    stop: () => group.stop(() => { for (const c of clients) c.disconnect(); }),
  };
  try {
    const p = direct(primaryPort);
    const r = direct(replicaPort);
    await until('the primary to answer', 10_000, async () => (await p.ping()) === 'PONG');
    await until('the replica to sync', 10_000, async () => String(await r.info('replication')).includes('master_link_status:up'));
    const sentinel = serve([config, '--sentinel']);
    children.push(sentinel);
    await set.awaitPrimary(primaryPort, 10_000);
    // The Sentinel must know the replica before it can promote it.
    const s = direct(sentinelPort);
    await until('the Sentinel to see the replica', 10_000, async () => {
      const replicas = (await s.call('SENTINEL', 'replicas', SENTINEL_NAME)) as unknown[];
      return replicas.length === 1;
    });
  } catch (e) {
    await set.stop();
    throw e;
  }
  return set;
}
