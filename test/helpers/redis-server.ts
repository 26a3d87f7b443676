// A private redis-server for the tests: its own unix socket in a temporary folder, no persistence,
// stopped after. Outside CI, a machine without redis-server skips the Redis tests and says so
// loudly; under CI (CI=true) that is a failure.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll } from 'vitest';

/** Whether a redis-server is on PATH. Under CI its absence throws. */
export function redisAvailable(): boolean {
  const found = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).status === 0;
  if (!found) {
    if (process.env.CI) throw new Error('redis-server is not on PATH: CI must install it (.ci/run does)');
    console.warn('\n*** redis-server is not on PATH: the Redis tests are SKIPPED. Install it (apt-get install redis-server) to run them. ***\n');
  }
  return found;
}

export interface TestRedis {
  /** The unix socket it listens on. */
  socket: string;
  /** The server process (for SIGSTOP/SIGCONT). */
  process: ChildProcess;
  /** Kills it with SIGKILL. */
  kill(): Promise<void>;
  /** Starts a fresh one on the same socket (empty: no persistence). */
  relaunch(): Promise<void>;
  stop(): Promise<void>;
}

function launch(socket: string): Promise<ChildProcess> {
  const child = spawn('redis-server', [
    '--port', '0', '--unixsocket', socket, '--unixsocketperm', '700',
    '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    // Ready once the socket accepts a PING. Asked without blocking: a relaunch happens while the
    // fault tests' calls are in flight, and their deadlines' timers must keep running.
    let asking = false;
    const ready = setInterval(() => {
      if (asking) return;
      asking = true;
      execFile('redis-cli', ['-s', socket, 'PING'], { encoding: 'utf8' }, (_e, stdout) => {
        asking = false;
        if (stdout?.trim() === 'PONG' && child.exitCode === null) {
          clearInterval(ready);
          resolve(child);
        }
      });
    }, 20);
    child.stdout?.on('data', (d) => { out += String(d); });
    child.stderr?.on('data', (d) => { out += String(d); });
    child.once('exit', (code) => {
      clearInterval(ready);
      reject(new Error(`redis-server exited (${code}) before it was ready: ${out}`));
    });
  });
}

/** Starts a private server. */
export async function startRedis(): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'));
  const socket = join(dir, 'redis.sock');
  const server: TestRedis = {
    socket,
    process: await launch(socket),
    async kill() {
      const old = server.process;
      const gone = new Promise((r) => old.once('exit', r));
      old.kill('SIGKILL');
      await gone;
    },
    async relaunch() {
      server.process = await launch(socket);
    },
    async stop() {
      const p = server.process;
      if (p.exitCode === null && p.signalCode === null) {
        const gone = new Promise((r) => p.once('exit', r));
        p.kill('SIGCONT');
        p.kill('SIGKILL');
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}

/**
 * A private server and an ioredis client on it for the describe block that calls this: started
 * before its tests, stopped after. Read `server` and `io` inside the tests.
 */
export function privateRedis(): { readonly server: TestRedis; readonly io: Redis } {
  let server: TestRedis | undefined;
  let io: Redis | undefined;
  beforeAll(async () => {
    server = await startRedis();
    io = new Redis({ path: server.socket });
    await io.ping();
  });
  afterAll(async () => {
    io?.disconnect();
    await server?.stop();
  });
  return {
    get server() {
      return server as TestRedis;
    },
    get io() {
      return io as Redis;
    },
  };
}

/**
 * A limiter's first answer from Redis, for tests that give it a short timeoutMs: that call also
 * reads Redis's clock and may load the script, and on a busy machine its answer can come after the
 * deadline (found: a first decision answered by onError; a first get rejected). Calls `call` again,
 * past the breaker's first cooldown, until `answered` holds (a rejection is tried again too); 40
 * tries at most. Only for calls whose repeat changes nothing the test counts: probes (cost 0), get,
 * or spends on a limit the test never reaches (an unanswered call may still have spent).
 */
export async function firstAnswer<T>(call: () => Promise<T>, answered: (t: T) => boolean): Promise<T> {
  let last: unknown;
  for (let i = 0; i < 40; i++) {
    try {
      const t = await call();
      if (answered(t)) return t;
      last = t;
    } catch (e) {
      last = e;
    }
    await new Promise((res) => setTimeout(res, 150));
  }
  throw new Error(`Redis answered none of 40 tries; the last: ${String(last)}`);
}

/**
 * The deadline (timeoutMs) of the limiters in tests that count Redis's own decisions rather than
 * time its deadlines: one no busy machine's round trip reaches. A limiter's first call also reads
 * Redis's clock and loads its script, and at the default 500 ms a loaded machine had it answered
 * by onError (found: 1 in 8 runs of a file beside two CPU-bound loops). Tests of deadlines and
 * outages set their own.
 */
export const TEST_TIMEOUT_MS = 5_000;

/** For `firstAnswer`: a decision Redis made (not answered by onError). */
export const byRedis = (d: { degraded?: true }): boolean => d.degraded !== true;

/** Makes the keys a script call touched live for ever, in the same transaction as the call. */
/**
 * What a test that sets the script's time passes as setScriptTime's ttlPadMs: an hour, longer
 * than any test runs, so no key expires on Redis's clock while the test's clock stands still.
 */
export const SCRIPT_TTL_PAD_MS = 3_600_000;

const PERSIST_KEYS = "for i = 1, #KEYS do redis.call('PERSIST', KEYS[i]) end return 0";

/**
 * `io` for a limiter whose script time is the tests' (setScriptTime): each script call runs in
 * MULTI/EXEC with a PERSIST of its keys after it. The script sets TTLs in the tests' milliseconds,
 * which Redis counts on its own clock: a key 1 test-ms before its window's end expired 1 real ms
 * later, and a call that came after that on a busy machine found it gone at the same test time
 * (the vectors test saw remaining 3 for the second request of a window, found in CI). Redis 7
 * freezes time for a whole EXEC, so the key cannot expire between the script and the PERSIST;
 * the script's decisions never rely on expiry (each stored state says when it was made).
 */
export function heldKeys(io: Redis): { call(command: string, ...args: (string | number)[]): Promise<unknown> } {
  return {
    async call(command, ...args) {
      if (command !== 'EVALSHA' && command !== 'EVAL') return io.call(command, ...args);
      const numKeys = Number(args[1]);
      const keys = args.slice(2, 2 + numKeys);
      const replies = await io.multi().call(command, ...args).call('EVAL', PERSIST_KEYS, numKeys, ...keys).exec();
      const [error, reply] = (replies ?? [])[0] ?? [new Error('EXEC was aborted'), null];
      if (error) throw error;
      return reply;
    },
  };
}

/** Both clients, each made on a server's socket and closed after; they reconnect after faults. */
export interface TestClient {
  name: string;
  make(socket: string): Promise<unknown>;
  close(c: unknown): Promise<void>;
}
export const testClients: TestClient[] = [
  {
    name: 'ioredis',
    async make(socket) {
      const c = new Redis({ path: socket, maxRetriesPerRequest: null, retryStrategy: () => 20 });
      c.on('error', () => {}); // a killed or frozen server closes the connection; ioredis reconnects
      await new Promise((r) => c.once('ready', r));
      return c;
    },
    async close(c) {
      (c as Redis).disconnect();
    },
  },
  {
    name: 'node-redis',
    async make(socket) {
      const c = createClient({ socket: { path: socket, reconnectStrategy: () => 50 } });
      c.on('error', () => {}); // the same for node-redis
      await c.connect();
      return c;
    },
    async close(c) {
      await (c as ReturnType<typeof createClient>).disconnect().catch(() => {});
    },
  },
];
