/**
 * Which errors from Redis are outages and which are misconfiguration. An outage (the server
 * away, loading, a replica answering during a failover, a cluster reconfiguring, a deadline
 * passed) is answered by `onError` and counts against the breaker: waiting helps. A
 * misconfiguration does not pass by waiting, and `onError: 'allow'` would run the service with
 * no limit, silently: the call rejects with a `RedisConfigError` whatever `onError` says, and the
 * breaker does not count it.
 *
 * | Redis answers | is |
 * |---|---|
 * | NOPERM, "ERR The user executing the script can't run this command" (an ACL without the commands the scripts need) | misconfiguration |
 * | NOAUTH, WRONGPASS (authentication) | misconfiguration |
 * | WRONGTYPE (another program's value under the limiter's keys: a shared prefix) | misconfiguration |
 * | OOM (maxmemory reached under a policy that refuses writes) | misconfiguration |
 * | "ERR Error compiling script", "ERR user_script:...", "ERR unknown command" (a script that cannot load or run, scripting disabled) | misconfiguration |
 * | LOADING, READONLY, BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, a closed connection, no answer by the deadline, a malformed reply | outage |
 *
 * An error raised inside a script is read by what it wraps. Redis 7 answers it with its own
 * code first ("WRONGTYPE ... script: <sha>, on @user_script:1."); Redis 6 and earlier wrap it:
 * "ERR Error running script (call to f_<sha>): @user_script:1: WRONGTYPE ...", and an error the
 * scripting layer raised itself (an ACL's refusal, OOM, an unknown command) also carries its
 * place and the reply's '-': "... @user_script:1: @user_script: 1: -OOM command not allowed ...".
 * Without unwrapping, those were outages on Redis 6 (answered by onError). A batch script catches
 * each decision's error and hands its message back as Lua saw it (script-batcher.ts,
 * DecisionError): the same forms, without the "ERR Error running script" head.
 */

const CONFIG_ERRORS = [
  /^NOPERM\b/, /^NOAUTH\b/, /^WRONGPASS\b/, /^WRONGTYPE\b/, /^OOM\b/,
  /^ERR The user executing the script can't run/, /^ERR Error compiling script/, /^ERR user_script:/, /^ERR unknown command/,
  /^ERR Unknown Redis command called from Lua script/,
];

/** Redis 6's head of an error raised in a script: "ERR Error running script (call to f_<sha>): ". */
const RUNNING_SCRIPT = /^ERR Error running script \(call to [^)]*\): /;
/** The place the scripting layer puts before a script's error ("@user_script:1: ", "@user_script: 1: "), and a reply's '-'. */
const PLACE = /^(?:@user_script: ?\d+: )+-?/;

/**
 * What a script's error wraps (see above): `message` less Redis 6's head and the places before
 * it; a Lua runtime error ("user_script:12: attempt to ...", no '@') is left as it is.
 */
export function unwrapScriptError(message: string): string {
  const inner = message.replace(RUNNING_SCRIPT, '');
  return inner.replace(PLACE, '');
}

/** Whether Redis's `message` is a misconfiguration: itself, or what a script's error wraps (with "ERR " where Redis 7 would put it). */
function isConfigMessage(message: string): boolean {
  const inner = unwrapScriptError(message);
  return CONFIG_ERRORS.some((re) => re.test(message) || re.test(inner) || re.test(`ERR ${inner}`));
}

/**
 * A call Redis refused for a reason that waiting does not fix (see the table above): the
 * limiter's decision rejects with it, whatever `onError` says. `redisMessage` is Redis's own.
 * `verify()` rejects with it too, for a server that may evict the limiter's keys.
 */
export class RedisConfigError extends Error {
  override readonly name = 'RedisConfigError';
  /** Redis's error, as it answered. */
  readonly redisMessage: string;

  /** `lead`: what went wrong, when it is not a call Redis refused (verify() found the server set up wrong). */
  constructor(redisMessage: string, options?: { cause?: unknown; lead?: string }) {
    const lead = options?.lead ?? `Redis refused the limiter's call, which waiting will not fix (check the ACL, the prefix and maxmemory-policy; ` +
      `see docs/redis.md)`;
    super(`${lead}: ${redisMessage}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.redisMessage = redisMessage;
  }
}

/** `error` as a RedisConfigError when it is a misconfiguration, else undefined (an outage). */
export function configError(error: unknown): RedisConfigError | undefined {
  if (error instanceof RedisConfigError) return error;
  const message = error instanceof Error ? error.message : typeof error === 'string' ? error : '';
  return isConfigMessage(message) ? new RedisConfigError(message, { cause: error }) : undefined;
}
