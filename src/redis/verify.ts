import { createHash } from 'node:crypto';
import { checkNames } from '../config/option-names.js';
import { describe } from '../config/check.js';
import type { Decision } from '../rate/types.js';
import type { RedisCommands } from './client.js';
import { configError, RedisConfigError } from './redis-errors.js';

/**
 * A Redis limiter's `verify()`: once, at startup, that its scripts load and run on the server and
 * that the server will not evict its keys. Every key the limiter writes has an expiry, so every
 * `maxmemory-policy` but `noeviction` may evict them under memory pressure (the `volatile-*`
 * ones too), and an evicted key reads as fresh: its whole burst again, silently. So a policy that
 * evicts is refused unless the caller accepts it.
 *
 * The policy is read with `INFO memory` from a script routed by a key under the limiter's prefix:
 * on a Cluster, from the nodes serving keys spread over every 256th slot (every node that holds
 * a run of at least 256 slots); an ACL without `+info` leaves it unknown (null), not an error.
 */

/** What `verify()` found. Plain data. */
export interface RedisVerification {
  /**
   * The `maxmemory-policy` values seen (one per distinct value; several nodes may share one), or
   * null when the server would not say (an ACL without `+info`).
   */
  readonly maxmemoryPolicy: readonly string[] | null;
  /** Whether a policy seen may evict the limiter's keys (any but `noeviction`); null when unknown. */
  readonly evicts: boolean | null;
}

/** `verify()`'s options. */
export interface VerifyOptions {
  /** Resolve even when the server may evict the limiter's keys (their state is then lost under memory pressure). Default false. */
  allowEviction?: boolean;
}

const INFO_SCRIPT = "return redis.call('INFO', 'memory')";
const INFO_SHA = createHash('sha1').update(INFO_SCRIPT).digest('hex');
/** The key the probe decides on (cost 0: nothing is written). */
export const VERIFY_KEY = '__sluice_verify__';
/** Slots per group of the Cluster sweep: one routing key in each. */
const SLOTS_PER_PROBE = 256;

/** Routing keys under `prefix` whose slots fall in every group of SLOTS_PER_PROBE slots (one key on a standalone server). */
function routingKeys(redis: RedisCommands, prefix: string): string[] {
  if (!redis.cluster) return [`${prefix}{${VERIFY_KEY}}`];
  const groups = 16_384 / SLOTS_PER_PROBE;
  const keys: (string | undefined)[] = new Array(groups).fill(undefined);
  let found = 0;
  for (let i = 0; found < groups; i++) {
    const key = `${prefix}{${VERIFY_KEY}${i}}`;
    const group = Math.floor(redis.slotOf(key) / SLOTS_PER_PROBE);
    if (keys[group] === undefined) {
      keys[group] = key;
      found++;
    }
  }
  return keys as string[];
}

/**
 * Checks the server behind `redis` for a limiter whose keys start with `prefix`: `probe` runs a
 * decision of cost 0 through the limiter (its scripts load and run, or the call rejects with the
 * `RedisConfigError` Redis caused), then the policy is read. Rejects with `RedisConfigError` for
 * a policy that evicts unless `allowEviction`, with an `Error` when Redis did not answer the probe.
 */
export async function verifyServer(
  redis: RedisCommands, prefix: string, probe: () => Promise<Decision>, options: VerifyOptions | undefined,
): Promise<RedisVerification> {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw new TypeError(`options must be an object like { allowEviction }, got ${describe(options)}`);
  }
  checkNames(options ?? {}, ['allowEviction'], 'options', 'verify option');
  const allowEviction = options?.allowEviction ?? false;
  if (typeof allowEviction !== 'boolean') throw new TypeError(`options.allowEviction must be a boolean, got ${describe(allowEviction)}`);
  const decision = await probe();
  if (decision.degraded === true) {
    throw new Error('Redis did not answer the verification probe (an outage, or later than timeoutMs): the limiter answers by onError until it does');
  }
  const seen = new Set<string>();
  let known = true;
  for (const key of routingKeys(redis, prefix)) {
    let info: unknown;
    try {
      info = await redis.evalScript(INFO_SHA, INFO_SCRIPT, [key], []);
    } catch (error) {
      // An ACL without INFO: the policy stays unknown. Anything else (an outage) is the caller's.
      if (configError(error) === undefined) throw error;
      known = false;
      break;
    }
    const policy = /^maxmemory_policy:(\S+)/m.exec(String(info))?.[1];
    if (policy === undefined) {
      known = false;
      break;
    }
    seen.add(policy);
  }
  if (!known) return { maxmemoryPolicy: null, evicts: null };
  const policies = [...seen].sort();
  const evicting = policies.filter((p) => p !== 'noeviction');
  if (evicting.length > 0 && !allowEviction) {
    throw new RedisConfigError(`maxmemory-policy ${evicting.join(', ')}`, {
      lead: `Redis may evict the limiter's keys (every key has an expiry, so volatile-* policies evict them too), and an evicted key ` +
        `admits its whole burst again: set maxmemory-policy to noeviction, or pass verify({ allowEviction: true }) to accept it`,
    });
  }
  return { maxmemoryPolicy: policies, evicts: evicting.length > 0 };
}
