// Reservations and their refunds at width 64 (WideGcra's reserve and refund on the one-limit path:
// RateLimiter.reserve, Reservation.cancel), as `reserve` does at width 32: 250 million a second
// with a burst of 2 (an interval of 4 ns, ticks of 2 ns, the 64-bit path, its staleness unit on).
// The set-up admits the key once; thread 0 then reserves and cancels, thread 1 checks the key
// twice. A clock move of one interval lets a check pass exactly when a cancel gave its interval
// back. Checked against the exact GCRA model with reservations (reserve.mjs), on the tick grid as
// gcra-64 does: readings, delays and act times in ticks, so no slack; and one live copy of the key.
import { linearizable } from '../models.mjs';
import { callsOnTickGrid, liveCopies, tableNames, timeMoves } from './common.mjs';
import { reservationModel, reservationOutcome, reserveThreads } from './reserve.mjs';

const limit = { permits: 250_000_000, periodMs: 1000, burst: 2 };
const TICK_MS = 2e-6;
const INTERVAL_MS = 4e-6;
/** The same limit with time in ticks of TICK_MS: one permit per 2 ticks, burst 2. */
const TICK_LIMIT = { permits: 1, periodMs: 2, burst: 2 };

const time = timeMoves({ startMs: 4_096_000, tickMs: TICK_MS, intervalMs: INTERVAL_MS });
time.moves.splice(2, 0, { name: '+interval', to: (now) => now + INTERVAL_MS });

export default {
  name: 'reserve-64',
  what: 'WideGcra reserve and refund (Reservation.cancel) racing allow on one key, at width 64',
  time,
  // Half the usual CI budget keeps npm run explore within its 3 minutes; the deep run goes further.
  bounds: { ci: { dfsBudgetMs: 4_000, pctBudgetMs: 1_000 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit, maxKeys: 4, hashSeed: 7 });
    if (rl.stats().width !== 64) throw new Error('reserve-64: the limit no longer takes the 64-bit path');
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: reserveThreads,
  names: tableNames,
  check(exec, lib) {
    const copies = liveCopies(exec.buffers[0], lib, ['k']);
    if (copies !== null) return copies;
    const { calls, ticks } = callsOnTickGrid(exec, TICK_MS);
    return linearizable(calls, reservationModel(TICK_LIMIT, 0), reservationOutcome(calls, ticks));
  },
};
