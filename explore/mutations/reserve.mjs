// Reservations after a clock step back (the reserve scenario).
export default [
  {
    name: 'a reservation whose delay forgets the clamp',
    what: 'RateLimiter.reserve reports the wait alone as delayMs when the decision was clamped to a reading ahead of the '
      + 'clock (a step back): the caller acts as far ahead of actAtMs as the clock went back (deep run 1:2 3:6 of 2026-12-03 '
      + 'showed the delay includes the lead)',
    scenario: 'reserve',
    edits: [{
      file: 'rate/rate-limiter.js',
      from: 'new HeldReservation(key, cost, waitMs + one.leadMs,',
      to: 'new HeldReservation(key, cost, waitMs,',
    }],
  },
];
