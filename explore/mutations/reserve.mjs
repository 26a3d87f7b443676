// Reservations after a clock step back (the reserve scenario), and cancelled after a reset of
// their key (reserve-reset: the slot's reset mark, table/reset-marks.ts); the one-limit spend
// give-back after a reset (gcra-give-back-reset: the same mark).
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
  {
    name: 'a cancel after a reset gives back',
    what: "a one-limit refund ignores its slot's reset mark (RefundMark.forgotten, before its compareExchange and after "
      + 'it): a cancel after a reset of its key gives its interval back from the admissions that counted from the fresh state',
    scenario: 'reserve-reset',
    edits: [{ file: 'table/reset-marks.js', from: 'return this.#on && resetSince(w, base, this.#mark);', to: 'return false;' }],
  },
  {
    name: 'a reservation reads its reset mark after its decision',
    what: "Gcra32's reserve loads its slot's reset mark after its compareExchange: a reset between the two is one the "
      + 'reservation counted before, and its cancel then gives back from the fresh state',
    scenario: 'reserve-reset',
    edits: [{
      file: 'rate/gcra-32.js',
      from: 'this.reservedMark = resetMark(this.#w, ref.base);\n        return this.#spend(ref, cost, RESERVE, maxWaitTicks);',
      to: 'const out = this.#spend(ref, cost, RESERVE, maxWaitTicks);\n        this.reservedMark = resetMark(this.#w, ref.base);\n        return out;',
    }],
  },
  {
    name: 'a width-64 block that writes nothing on a key owing longer',
    what: "WideGcra's block leaves the word as it was when the key owes the block or more: a refund that read the word "
      + 'before the block lands after it, and a reservation after the block acts inside it (found by an attack; the '
      + 'deep search finds it at cost 3, schedule 8:1 32:1 37:1 of 2026-12-05)',
    scenario: 'reserve-block-64',
    deep: true,
    // The same TAT written back: a compareExchange that changes nothing, as no write at all.
    edits: [{ file: 'rate/gcra-wide.js', from: 'add(this.#hi, this.#lo, 0, 1, next)', to: 'add(this.#hi, this.#lo, 0, 0, next)' }],
  },
  {
    name: 'a spend give-back after a reset gives back',
    what: "the one-limit spend give-back ignores its slot's reset mark (RefundMark.forgotten): a give-back after a reset of "
      + 'its key takes its interval from the admissions that counted from the fresh state (the found bug of the middleware\'s '
      + 'skipFailedRequests on one GCRA limit)',
    scenario: 'gcra-give-back-reset',
    edits: [{ file: 'table/reset-marks.js', from: 'return this.#on && resetSince(w, base, this.#mark);', to: 'return false;' }],
  },
  {
    name: 'a spend reads its reset mark after its decision',
    what: 'markedTryAcquire loads the slot\'s reset mark after the decision: a reset that wrote after the spend\'s commit and '
      + 'finished before that load reads as one before the spend, and the give-back takes from the fresh state',
    scenario: 'gcra-give-back-reset',
    edits: [{
      file: 'rate/rate-limiter.js',
      from: 'this.#spendMark = resetMark(w, entry.base);\n            this.#spendBase = entry.base;\n            const outcome = one.decide(entry, cost);',
      to: 'const outcome = one.decide(entry, cost);\n            this.#spendMark = resetMark(w, entry.base);\n            this.#spendBase = entry.base;',
    }],
  },
  {
    name: 'a one-limit give-back without its mark guard',
    what: "MarkGuard.take takes nothing: a reset lands between a give-back's check of the reset mark "
      + 'and its compareExchange, an admission brings the word back to its snapshot, the give-back lands on the fresh '
      + 'state and a second admission takes the place before its take-back (found by the deep search, schedule 18:1 36:1 41:1)',
    scenario: 'gcra-give-back-aba',
    edits: [{ file: 'table/reset-marks.js', from: 'take(base) {', to: 'take(base) {\n        return 1;' }],
  },
  {
    name: 'a width-64 one-limit give-back without its mark guard',
    what: 'the same on WideGcra (found by an attack: 3 admitted at 2 an hour by two real workers, 4 in 20,000 rounds)',
    scenario: 'gcra-give-back-aba-64',
    edits: [{ file: 'table/reset-marks.js', from: 'take(base) {', to: 'take(base) {\n        return 1;' }],
  },
  {
    name: 'a one-limit refund without its mark guard',
    what: "Gcra32's refund (a reservation's cancel) takes no guard, the other give-backs still do: a reset, a check and a "
      + "reservation bring the word back to the cancel's snapshot, and the cancel lands on the fresh state (found by an "
      + 'attack on the guard, which no test and no scenario then caught)',
    scenario: 'reserve-aba',
    edits: [{
      file: 'rate/gcra-32.js',
      from: '    #markedRefund(ref, cost, sinceMs, mark, end = NaN) {\n        const token = this.#guard.take(ref.base);',
      to: '    #markedRefund(ref, cost, sinceMs, mark, end = NaN) {\n        const token = 1;',
    }],
  },
];
