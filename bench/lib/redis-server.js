// A private redis-server for the Redis suites: its own unix socket in a temporary folder, no
// persistence, stopped after; freeze()/thaw() for the outage suite.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createClient } from 'redis';

/** 1,000 keys of 24 characters, the keys every Redis suite walks. */
export const KEYS = 1000;
export const keys = Array.from({ length: KEYS }, (_, i) => `user:${String(i).padStart(19, '0')}`);

/** Whether redis-server is on PATH; under CI its absence throws (`suite` names who needs it). */
export function redisServerFound(suite) {
  const found = spawnSync('redis-server', ['--version']).status === 0;
  if (!found && process.env.CI) throw new Error(`redis-server is not on PATH: the ${suite} suite needs it`);
  return found;
}

/** Starts a server on `socket`; resolves with its process once it answers PING. */
async function launch(socket) {
  const child = spawn('redis-server', ['--port', '0', '--unixsocket', socket, '--save', '', '--appendonly', 'no', '--loglevel', 'warning'], { stdio: 'ignore' });
  for (let i = 0; i < 250; i++) {
    if (spawnSync('redis-cli', ['-s', socket, 'PING'], { encoding: 'utf8' }).stdout?.trim() === 'PONG') break;
    await sleep(20);
  }
  return child;
}

/** Starts a server; resolves once it answers PING. */
export async function startRedisServer() {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-redis-'));
  const socket = join(dir, 'redis.sock');
  let child = await launch(socket);
  const version = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout.match(/v=(\S+)/)?.[1] ?? '?';
  return {
    socket,
    version,
    freeze: () => child.kill('SIGSTOP'),
    thaw: () => child.kill('SIGCONT'),
    /** Kills the server (SIGKILL): its memory is gone, and clients see their connection drop. */
    async kill() {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await gone;
    },
    /** Starts a fresh, empty server on the same socket, once killed. */
    async restart() {
      child = await launch(socket);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGCONT');
        child.kill('SIGKILL');
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Calls/s of `decide(key)` (resolving to whether it was allowed) over `ms`, on the keys in turn,
 * with `inFlight` calls outstanding at a time.
 */
export async function callRate(decide, inFlight, ms) {
  let calls = 0;
  let allowed = 0;
  const until = performance.now() + ms;
  const t0 = performance.now();
  async function lane(offset) {
    for (let i = offset; performance.now() < until; i += inFlight) {
      if (await decide(keys[i % KEYS])) allowed++;
      calls++;
    }
  }
  await Promise.all(Array.from({ length: inFlight }, (_, i) => lane(i)));
  return { calls, allowed, perSec: calls / ((performance.now() - t0) / 1000) };
}

/** The two clients, each opened on a server's socket and closed after. */
export const clients = {
  ioredis: {
    async open(socket) {
      const c = new Redis({ path: socket });
      await new Promise((r) => c.once('ready', r));
      return c;
    },
    close: (c) => c.disconnect(),
  },
  'node-redis': {
    async open(socket) {
      const c = createClient({ socket: { path: socket } });
      await c.connect();
      return c;
    },
    close: (c) => c.disconnect(),
  },
};
