// Waiting for a turn instead of refusing: acquire(), reserve() and cancel().
import { ManualClock, perSecond, RateLimiter, RateLimitTimeoutError } from 'sluice';

const clock = new ManualClock();
const limiter = new RateLimiter({ limit: perSecond(5), maxKeys: 100, clock });
for (let i = 0; i < 5; i++) await limiter.acquire('tenant:a'); // the burst: no waiting

const turn = limiter.reserve('tenant:a'); // counted now, may act later
console.log('reserved; act in', turn.delayMs, 'ms'); // 200

try {
  await limiter.acquire('tenant:a', { maxWaitMs: 100 }); // would wait 400 ms: refused at once
} catch (e) {
  if (!(e instanceof RateLimitTimeoutError)) throw e;
  console.log('too long:', e.retryAfterMs, 'ms'); // 400
}

console.log('cancelled:', turn.cancel()); // true: its 200 ms go back
const waiting = limiter.acquire('tenant:a').then(() => console.log('admitted at', clock.now(), 'ms'));
clock.advance(200); // a ManualClock: waiters follow it, nobody sleeps for real
await waiting; // admitted at 200 ms
