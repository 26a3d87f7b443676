// At most 2 requests in flight per key; a lease frees its place when released (or disposed).
import { ConcurrencyLimiter, ManualClock } from 'sluice';

const clock = new ManualClock();
const inFlight = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 30_000, maxKeys: 10_000, clock });

const first = inFlight.tryAcquire('gpu:tenant-a').lease; // 1 of 2 places
const second = inFlight.tryAcquire('gpu:tenant-a').lease; // 2 of 2
try {
  const third = inFlight.tryAcquire('gpu:tenant-a');
  console.log(third.allowed, third.reason, third.retryAfterMs); // false limited 30000 (an upper bound: expiry)
} finally {
  second[Symbol.dispose](); // in TypeScript: `using second = ...` releases at the end of the block
}
console.log(inFlight.tryAcquire('gpu:tenant-a', 0).remaining); // 1
first.release();

// A lease whose worker died is never released: it expires after leaseMs and its place comes back.
inFlight.tryAcquire('gpu:tenant-b');
inFlight.tryAcquire('gpu:tenant-b');
clock.advance(30_000);
console.log(inFlight.tryAcquire('gpu:tenant-b', 0).remaining); // 2
