import { createHash } from 'node:crypto';
import { describe } from '../config/check.js';
import { keySlot, keySlotOfBytes } from './key-slot.js';

/**
 * The few commands sluice sends, over whichever client the user passes: ioredis (`call`) or
 * node-redis (`sendCommand`), each standalone or Cluster. Duck-typed, so neither is a dependency
 * of the package.
 */
export interface RedisCommands {
  /**
   * Whether the client is a Redis Cluster client. Then every script call is routed by its keys,
   * which must all be in one slot (Redis answers CROSSSLOT otherwise), and each node has its own
   * clock.
   */
  readonly cluster: boolean;
  /**
   * Runs `script` (by its SHA1, loading it on NOSCRIPT) with `keys` and `args`. On a cluster it
   * goes to the node serving the keys' slot (the client follows MOVED and ASK redirects), so
   * `keys` must hold at least one key, all in one slot.
   */
  evalScript(sha: string, script: string, keys: string[], args: (string | number)[]): Promise<unknown>;
  /**
   * Redis's `TIME`, in microseconds. On a cluster, the clock of the node serving `routingKey`
   * (required there: nodes' clocks differ), read by a one-line script routed by that key; on a
   * standalone server the key is ignored.
   */
  time(routingKey?: string): Promise<number>;
  /**
   * The cluster slot that `key` is sent to: `keySlot` of the key as the client sends it (after
   * ioredis's `keyPrefix`, which its `call` applies to a script's keys). 0 for every key on a
   * standalone server, where all keys go to one place.
   */
  slotOf(key: string): number;
  /**
   * The address of the primary serving `slot`, as the client's own slot table has it now (it
   * follows MOVED: after a failover or a resharding the client learns the new one). '' on a
   * standalone server, and while the client has no slot table yet.
   */
  nodeOf(slot: number): string;
}

/** ioredis, `Redis` or `Cluster`: `call(command, ...args)`, routed by the command's keys on a Cluster. */
interface IoredisLike {
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
  /** `Cluster` says true. */
  isCluster?: unknown;
  /** Prepended by ioredis to every key it sends (a `Cluster` copies its nodes' option here). */
  options?: { keyPrefix?: unknown };
  /** A `Cluster`'s slot table: per slot, the addresses ("host:port") serving it, primary first. */
  slots?: unknown;
}

/** node-redis (v4 and later): `sendCommand([command, ...args])`, every argument a string. */
interface NodeRedisLike {
  sendCommand(args: string[]): Promise<unknown>;
}

/**
 * node-redis's cluster (`createCluster`): `sendCommand(firstKey, isReadonly, args)` sends to the
 * primary serving `firstKey`'s slot and follows MOVED and ASK redirects. This raw path does not
 * apply the cluster's `keyPrefix`.
 */
interface NodeRedisClusterLike {
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
  getSlotRandomNode(slot: number): unknown;
  /** Its slot table: per slot, a shard whose `master.address` is "host:port". */
  slots?: unknown;
}

/** Reads the clock of the node that serves the script's one key. */
export const TIME_SCRIPT = "return redis.call('TIME')";
export const TIME_SHA = createHash('sha1').update(TIME_SCRIPT).digest('hex');

/** Wraps a client; throws `TypeError` for anything that is neither kind. */
export function redisCommands(client: unknown): RedisCommands {
  if (client !== null && typeof client === 'object') {
    // Clusters first: ioredis's Cluster has `call` too, node-redis's cluster `sendCommand`.
    if ((client as IoredisLike).isCluster === true && typeof (client as IoredisLike).call === 'function') {
      const c = client as IoredisLike;
      // ioredis finds a script's keys in its arguments (numkeys) and routes by the first.
      const nodeOf = (slot: number): string => {
        const serving = Array.isArray(c.slots) ? (c.slots as unknown[])[slot] : undefined;
        return Array.isArray(serving) && typeof serving[0] === 'string' ? serving[0] : '';
      };
      return clusterCommands((command, _firstKey, args) => c.call(command, ...args), slotWithPrefix(c.options?.keyPrefix), nodeOf);
    }
    if (typeof (client as NodeRedisClusterLike).getSlotRandomNode === 'function' && typeof (client as NodeRedisClusterLike).sendCommand === 'function') {
      const c = client as NodeRedisClusterLike;
      const nodeOf = (slot: number): string => {
        const shard = Array.isArray(c.slots) ? ((c.slots as unknown[])[slot] as { master?: { address?: unknown } } | undefined) : undefined;
        const address = shard?.master?.address;
        return typeof address === 'string' ? address : '';
      };
      return clusterCommands((command, firstKey, args) => c.sendCommand(firstKey, false, [command, ...args.map(String)]), keySlot, nodeOf);
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

function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith('NOSCRIPT');
}

function micros(reply: unknown): number {
  const t = reply as [string | number, string | number];
  return Number(t[0]) * 1e6 + Number(t[1]);
}

function commands(send: (command: string, args: (string | number)[]) => Promise<unknown>): RedisCommands {
  return {
    cluster: false,
    async evalScript(sha, script, keys, args) {
      try {
        return await send('EVALSHA', [sha, keys.length, ...keys, ...args]);
      } catch (e) {
        // A server that restarted (or never saw the script) has no copy: EVAL sends and caches it.
        if (!isNoScript(e)) throw e;
        return send('EVAL', [script, keys.length, ...keys, ...args]);
      }
    },
    async time() {
      return micros(await send('TIME', []));
    },
    slotOf() {
      return 0;
    },
    nodeOf() {
      return '';
    },
  };
}

/** The slot of a key as ioredis sends it, after its `keyPrefix` (a string or a Buffer). */
function slotWithPrefix(prefix: unknown): (key: string) => number {
  if (typeof prefix === 'string' && prefix.length > 0) return (key) => keySlot(prefix + key);
  if (prefix instanceof Uint8Array && prefix.length > 0) return (key) => keySlotOfBytes(Buffer.concat([prefix, Buffer.from(key)]));
  return keySlot;
}

function clusterCommands(
  send: (command: string, firstKey: string, args: (string | number)[]) => Promise<unknown>,
  slotOf: (key: string) => number,
  nodeOf: (slot: number) => string,
): RedisCommands {
  async function evalScript(sha: string, script: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    const first = keys[0];
    // Without a key a cluster client would pick any node, which holds only its own slots' keys.
    if (first === undefined) {
      throw new RangeError('keys must hold at least one key on a Redis Cluster (a script is sent to the node serving its keys), got none');
    }
    try {
      return await send('EVALSHA', first, [sha, keys.length, ...keys, ...args]);
    } catch (e) {
      // Each node has its own script cache: the node serving these keys may never have seen it.
      if (!isNoScript(e)) throw e;
      return send('EVAL', first, [script, keys.length, ...keys, ...args]);
    }
  }
  return {
    cluster: true,
    evalScript,
    async time(routingKey) {
      if (typeof routingKey !== 'string') {
        throw new TypeError(
          `routingKey must be a string on a Redis Cluster (each node has its own clock: the one serving that key is read), got ${describe(routingKey)}`,
        );
      }
      return micros(await evalScript(TIME_SHA, TIME_SCRIPT, [routingKey], []));
    },
    slotOf,
    nodeOf,
  };
}
