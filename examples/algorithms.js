// Several limits at once, a global cap, and the four algorithms, on a manual clock.
import { ManualClock, perMinute, perSecond, RateLimiter } from 'sluice';

const clock = new ManualClock();
// 5 per second AND 20 per minute per key, and 100 per second over all keys together.
const api = new RateLimiter({ limit: [perSecond(5), perMinute(20)], globalLimit: perSecond(100), maxKeys: 10_000, clock });
console.log(api.tryAcquire('user:1', 5)); // allowed, 0 left this second
console.log(api.tryAcquire('user:1')); // refused by the per-second limit; nothing spent from the per-minute one
clock.advance(1_000);
console.log(api.tryAcquire('user:1', 0).remaining); // 5: this second's 5 are back, 15 left this minute

// The same client against each algorithm: 100 per minute, one try every 10 ms for 5 minutes.
// (`@type {const}` keeps the names as the literal types the `algorithm` option takes.)
for (const algorithm of /** @type {const} */ (['gcra', 'fixed-window', 'sliding-window', 'sliding-log'])) {
  const c = new ManualClock(30_000); // halfway through a minute
  const limiter = new RateLimiter({ limit: perMinute(100), algorithm, maxKeys: 10, clock: c });
  let allowed = 0;
  for (let t = 30_000; t < 330_000; t += 10) {
    c.set(t);
    if (limiter.allow('client')) allowed++;
  }
  console.log(`${algorithm.padEnd(14)} ${allowed} allowed in 5 minutes`);
}
