// Which of Redis's errors are misconfigurations (RedisConfigError, whatever onError says) and which
// are outages (onError answers), on the messages themselves: the forms of Redis 7, the forms Redis
// 6 and earlier give an error raised inside a script, and the messages a batch script's caught
// errors carry (script-batcher.ts, DecisionError). No Redis 6 server here: the messages are those
// its scripting layer writes ("Error running script (call to f_<sha>): " before the error, and
// "@user_script: <line>: " before an error the layer raises itself, with the reply's '-').
import { describe, expect, it } from 'vitest';
import { configError, RedisConfigError } from '../../src/redis/redis-errors.js';

const SHA = 'f_0123456789abcdef0123456789abcdef01234567';
const wrapped = (inner: string): string => `ERR Error running script (call to ${SHA}): @user_script:12: ${inner}`;

describe("Redis's errors, classified", () => {
  it.each([
    // Redis 7, as a script's error ends the call
    'WRONGTYPE Operation against a key holding the wrong kind of value script: 0123abcd, on @user_script:12.',
    "NOPERM this user has no permissions to run the 'get' command",
    "ERR The user executing the script can't run this command or subcommand script: 0123abcd, on @user_script:12.",
    "OOM command not allowed when used memory > 'maxmemory'. script: 0123abcd, on @user_script:12.",
    'ERR user_script:12: attempt to compare nil with number script: 0123abcd, on @user_script:12.',
    // Redis 6: a command's error inside a script
    wrapped('WRONGTYPE Operation against a key holding the wrong kind of value'),
    wrapped("NOPERM this user has no permissions to run the 'get' command or its subcommand"),
    // Redis 6: errors the scripting layer raises itself, with their place and the reply's '-'
    wrapped("@user_script: 12: -OOM command not allowed when used memory > 'maxmemory'."),
    wrapped("@user_script: 12: The user executing the script can't run this command or subcommand"),
    wrapped('@user_script: 12: Unknown Redis command called from Lua script'),
    // Redis 6: a Lua runtime error (a script that cannot run)
    wrapped('user_script:12: attempt to compare nil with number'),
    // caught in a batch script, per decision (DecisionError): as Lua sees them
    'WRONGTYPE Operation against a key holding the wrong kind of value',
    "@user_script: 12: -OOM command not allowed when used memory > 'maxmemory'.",
    "@user_script: 12: The user executing the script can't run this command or subcommand",
    'user_script:12: attempt to perform arithmetic on a nil value',
  ])('a misconfiguration: %s', (message) => {
    const e = configError(new Error(message));
    expect(e).toBeInstanceOf(RedisConfigError);
    expect(e?.redisMessage).toBe(message);
  });

  it.each([
    'Connection is closed.',
    'LOADING Redis is loading the dataset in memory',
    "READONLY You can't write against a read only replica.",
    'BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.',
    'CLUSTERDOWN The cluster is down',
    'TRYAGAIN Multiple keys request during rehashing of slot',
    // Redis 6: an outage raised inside a script stays one
    wrapped("@user_script: 12: -READONLY You can't write against a read only replica."),
    wrapped('MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to no.'),
    // caught in a batch script
    "READONLY You can't write against a read only replica.",
    "@user_script: 12: -READONLY You can't write against a read only replica.",
  ])('an outage: %s', (message) => {
    expect(configError(new Error(message))).toBeUndefined();
  });
});
