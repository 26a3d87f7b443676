import { describe } from '../errors.js';

/**
 * The few commands sluice sends, over whichever client the user passes: ioredis (`call`) or
 * node-redis (`sendCommand`). Duck-typed, so neither is a dependency of the package.
 */
export interface RedisCommands {
  /** Runs `script` (by its SHA1, loading it on NOSCRIPT) with `keys` and `args`. */
  evalScript(sha: string, script: string, keys: string[], args: (string | number)[]): Promise<unknown>;
  /** Redis's `TIME`, in microseconds. */
  time(): Promise<number>;
}

/** ioredis: `call(command, ...args)`. */
interface IoredisLike {
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
}

/** node-redis (v4 and later): `sendCommand([command, ...args])`, every argument a string. */
interface NodeRedisLike {
  sendCommand(args: string[]): Promise<unknown>;
}

/** Wraps a client; throws `TypeError` for anything that is neither kind. */
export function redisCommands(client: unknown): RedisCommands {
  if (client !== null && typeof client === 'object') {
    // A batch holds many users' keys, which a Cluster spreads over its slots (CROSSSLOT): refuse
    // it plainly until batches are grouped by slot. ioredis says isCluster; node-redis's cluster
    // has getSlotRandomNode.
    if ((client as { isCluster?: unknown }).isCluster === true || typeof (client as { getSlotRandomNode?: unknown }).getSlotRandomNode === 'function') {
      throw new TypeError('options.redis is a Redis Cluster client: RedisRateLimiter supports standalone Redis (or a single primary) for now');
    }
    // ioredis has both; its sendCommand takes its own Command objects, so `call` decides.
    if (typeof (client as IoredisLike).call === 'function') {
      const c = client as IoredisLike;
      return commands((command, args) => c.call(command, ...args));
    }
    if (typeof (client as NodeRedisLike).sendCommand === 'function') {
      const c = client as NodeRedisLike;
      return commands((command, args) => c.sendCommand([command, ...args.map(String)]));
    }
  }
  throw new TypeError(`options.redis must be an ioredis or node-redis client (with call() or sendCommand()), got ${describe(client)}`);
}

function commands(send: (command: string, args: (string | number)[]) => Promise<unknown>): RedisCommands {
  return {
    async evalScript(sha, script, keys, args) {
      try {
        return await send('EVALSHA', [sha, keys.length, ...keys, ...args]);
      } catch (e) {
        // A server that restarted (or never saw the script) has no copy: EVAL sends and caches it.
        if (!(e instanceof Error) || !e.message.startsWith('NOSCRIPT')) throw e;
        return send('EVAL', [script, keys.length, ...keys, ...args]);
      }
    },
    async time() {
      const t = (await send('TIME', [])) as [string | number, string | number];
      return Number(t[0]) * 1e6 + Number(t[1]);
    },
  };
}
