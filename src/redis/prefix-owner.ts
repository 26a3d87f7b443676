import { createHash } from 'node:crypto';
import type { RedisCommands } from './client.js';
import { configError, RedisConfigError } from './redis-errors.js';

/**
 * Which configuration a prefix given to a Redis limiter belongs to. Two limiters of other limits
 * that share a prefix would share every key's state silently (a count or a debt read under the
 * other's limits). So the first call of a limiter with a given prefix records its configuration
 * under the prefix, once, or finds the one recorded: another configuration's is a
 * `RedisConfigError` for that call and every later one, whatever `onError` says. The default
 * prefixes carry a fingerprint of the limits in their name, and need no record.
 *
 * Modes (option `prefixCheck`): 'check' (the default with a prefix given), 'adopt' (record this
 * configuration over another's: a deliberate change of limits under one prefix; processes still
 * running the old limits checked at their start and go on), 'off'.
 *
 * Thread-safety: one instance per limiter instance (per thread).
 */

/** The key that holds the record, under the prefix (one slot of its own on a Cluster). */
export const CONFIG_KEY = '{__sluice_config__}';
/** Records ARGV[1] when there is none (or always, ARGV[2] '1'), and answers the record. No expiry. */
const SCRIPT = "local cur = redis.call('GET', KEYS[1]) " +
  "if cur == false or ARGV[2] == '1' then redis.call('SET', KEYS[1], ARGV[1]) return ARGV[1] end return cur";
const SHA = createHash('sha1').update(SCRIPT).digest('hex');

export type PrefixCheck = 'check' | 'adopt' | 'off';

/** How often an unanswered check is tried again, in the background (ms). */
const RETRY_MS = 1000;

export class PrefixOwner {
  readonly #commands: RedisCommands;
  readonly #key: string;
  readonly #config: string;
  readonly #adopt: boolean;
  readonly #timeoutMs: number;
  /** The check in flight, if any. */
  #pending: Promise<void> | null;
  /** Set once another configuration's record was found: every call rejects with it. */
  #mismatch: RedisConfigError | null = null;
  /** True once the record matched (or with mode 'off'): nothing more to do. */
  #checked: boolean;
  /** A check went unanswered (an outage): calls no longer wait for one; it is tried again in the background. */
  #unanswered = false;
  #lastTry = -Infinity;

  /** How a call is refused once the prefix is known to be another's (RedisCore.rejectNow: paced for the event loop). */
  readonly #reject: (e: Error) => Promise<never>;

  /**
   * `config`: this limiter's configuration, as recorded (JSON). `reject`: makes the rejection of
   * a call once the prefix is known to be another's, without Redis (RedisCore.rejectNow, which
   * lets the event loop turn as the local tier's answers do).
   */
  constructor(commands: RedisCommands, prefix: string, config: string, mode: PrefixCheck, timeoutMs: number, reject: (e: Error) => Promise<never>) {
    this.#commands = commands;
    this.#reject = reject;
    this.#key = prefix + CONFIG_KEY;
    this.#config = config;
    this.#adopt = mode === 'adopt';
    this.#timeoutMs = timeoutMs;
    this.#checked = mode === 'off';
    this.#pending = null;
  }

  /**
   * What a call waits for before it decides: null when nothing (the common case: the prefix is
   * known to be this configuration's), the first check while it is in flight, or a rejection with
   * `RedisConfigError` once the prefix was found to be another's. When the first check goes
   * unanswered (Redis away, or later than `timeoutMs`), calls stop waiting, so that an outage
   * costs no more than it does without the check, and it is tried again in the background at
   * most once a second until Redis answers it.
   */
  ready(): Promise<void> | null {
    if (this.#mismatch !== null) return this.#reject(this.#mismatch);
    if (this.#checked) return null;
    if (this.#pending !== null) return this.#unanswered ? null : this.#pending;
    const now = performance.now();
    if (this.#unanswered && now - this.#lastTry < RETRY_MS) return null;
    this.#lastTry = now;
    const check = this.#check().finally(() => { this.#pending = null; });
    this.#pending = check;
    if (!this.#unanswered) return check;
    check.catch(() => {}); // in the background: a mismatch is kept in #mismatch for the next calls
    return null;
  }

  async #check(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stored: unknown;
    try {
      stored = await Promise.race([
        this.#commands.evalScript(SHA, SCRIPT, [this.#key], [this.#config, this.#adopt ? '1' : '0']),
        new Promise((resolve) => { timer = setTimeout(resolve, this.#timeoutMs, undefined); }),
      ]);
    } catch (error) {
      const config = configError(error);
      if (config !== undefined) throw config; // an ACL without GET or SET: loud, as every call's
      this.#unanswered = true; // an outage: tried again in the background
      return;
    } finally {
      clearTimeout(timer);
    }
    if (stored === undefined) {
      this.#unanswered = true; // no answer in time: tried again in the background
      return;
    }
    const found = Buffer.isBuffer(stored) ? stored.toString() : typeof stored === 'string' ? stored : null;
    if (found === this.#config) {
      this.#checked = true;
      return;
    }
    if (found === null || !found.startsWith('{"algorithm":')) {
      // Not a record (a reply that is not the script's): no verdict; tried again in the background.
      this.#unanswered = true;
      return;
    }
    this.#mismatch = new RedisConfigError(`${this.#key} holds ${found}; this limiter is ${this.#config}`, {
      lead: 'another limiter of other limits uses this prefix, and the two would share every key\'s state: give each its own prefix (or leave ' +
        'the prefix to its default, which names the limits), or pass prefixCheck: \'adopt\' to record these limits over the others deliberately',
    });
    throw this.#mismatch;
  }
}
