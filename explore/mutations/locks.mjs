// The per-key lock (src/table/slot-lock.ts) and what runs under it: the sliding log's locked
// engine (src/rate/locked-engine.ts, src/rate/limit-set.ts) and leases (src/concurrency/).
// Each entry reverts one fix in a copy of the built dist/.
export default [
  {
    name: 'taken-over log holder rewrote the new holder entry',
    what: 'a holder whose lock was taken over decides a lost race again and writes over the new holder\'s entry (fix 53b46f4)',
    // Three preemptions and a clock move: '18:1 19:1 31:1 38:1' here ('28:1 36:2 48:1 55:1' on
    // locked-log, whose deep search missed it twice in 1,500 s once lookups loaded the reclaim
    // floor's sequence; it had found it after 917 s before).
    scenario: 'locked-log-held',
    deep: true,
    budgetS: 1500,
    edits: [{ file: 'rate/limit-set.js', from: '            if (holds !== null && !holds())\n                return false;\n', to: '' }],
  },
  {
    name: 'a policy reshape that wiped another pair\'s spends',
    what: 'a reshape taken over under its pair lock reads the words of the pair that took the slot after a reclaim and writes '
      + 'a fresh state over them, with no lock check between its reads and its writes (fix f353f07)',
    scenario: 'policy-reshape-reuse',
    deep: true, // a preemption and a clock move over runs of about 150 steps: '21:4' (the reshape's guarded try)
    budgetS: 600, // found after 127.9 s of deep search beside another deep run
    edits: [{ file: 'policy/pair-shape.js', from: '    if (!holds())\n        return false;\n', to: '' }],
  },
  {
    name: 'dead lock holder kept its key',
    what: 'a reclaim only takes a free lock, so an idle key whose holder died is never swept (fix efbeb96)',
    scenario: 'locked-dead-holder',
    edits: [{
      file: 'table/slot-lock.js',
      from: 'const token = tryLock(w, lockAt, owner, ages);',
      to: 'const token = tryLock(w, lockAt, owner, { stealAfterMs: Infinity, reclaimAfterMs: Infinity });',
    }],
  },
  {
    name: 'lock takeover spent twice',
    what: 'a decision whose admission landed decides again when its release fails after a takeover (fix b6d6d94)',
    scenario: 'locked-log',
    edits: [{
      file: 'table/slot-lock.js',
      from: '        unlock(w, lockAt, token);\n        if (ok)\n            return DONE;',
      to: '        if (!unlock(w, lockAt, token))\n            ok = false;\n        if (ok)\n            return DONE;',
    }],
  },
  {
    name: 'stalled acquire landed on the slot next key',
    what: 'settle reads the 0 the next key\'s insert left as a release: a lease stands in another key\'s places (fix f353f07)',
    scenario: 'lease-reuse',
    edits: [{
      file: 'table/slot-lock.js',
      from: '        if (Atomics.load(w, base + S_CTRL) !== ctrl)\n            return false;\n' +
        '        if ((cur & HELD) === 0)\n',
      to: '        if ((cur & HELD) === 0)\n',
    }],
  },
  {
    name: 'tryLock read the clock before the lock word',
    what: 'a reading older than the lock word\'s stamp ages it 2^20 - 1 ms: a sweep takes a fresh lock over (fix 6ed30c7; '
      + 'since cb7ae83 a stamp ahead of the reading reads as young, which closes it too: both are reverted)',
    scenario: 'locked-sweep',
    budgetS: 30, // found after 9 s of DFS
    edits: [{ file: 'table/slot-lock.js', from: 'return age >= AGE_LIMIT ? 0 : age;', to: 'return age;' }, {
      file: 'table/slot-lock.js',
      from: '    const cur = Atomics.load(w, index);\n' +
        '    // The clock after the load, as in `lock`: a reading taken before it could be older than the\n' +
        '    // token loaded, whose age would then wrap to 2^20 - 1 ms and a fresh lock be taken over.\n' +
        '    const token = successor(cur, owner, processNow(), ages, true, false);',
      to: '    const now = processNow();\n    const cur = Atomics.load(w, index);\n' +
        '    const token = successor(cur, owner, now, ages, true, false);',
    }],
  },
  {
    name: 'reclaim took a lock over after the steal age',
    what: 'a sweep takes a stalled holder\'s lock over as soon as a decision may, reclaims the key, and the holder may write into the slot\'s next key',
    scenario: 'locked-sweep',
    edits: [{
      file: 'table/slot-lock.js',
      from: '    if (forReclaim)\n        return age > guard ? lockToken(owner, now) : FREE;',
      to: '    if (forReclaim)\n        return age > ages.stealAfterMs ? lockToken(owner, now) : FREE;',
    }],
  },
  {
    name: 'a stamp ahead of the reading read as old',
    what: 'ageMs reads a lock or guard stamp 1 s ahead of the reading as 2^20 - 1,000 ms old: a penalty takes a live give-back '
      + 'guard over, and the take-back subtracts from the count the penalty filled',
    scenario: 'window-penalty',
    deep: true, // found by PCT as '0:1 11:2 28:1 29:1 43:1 46:5'; a 300 s DFS finds '0:1 11:2 29:1 30:1 45:1 48:5'
    budgetS: 300,
    edits: [{ file: 'table/slot-lock.js', from: 'return age >= AGE_LIMIT ? 0 : age;', to: 'return age;' }],
  },
  {
    name: 'a lease stamped at or below a reset\'s floor',
    what: 'ConcurrencyLimiter stamps a lease now + lease even at or below the floor a reset raised: a lease taken before the reset, '
      + 'released after it in the same tick, frees the place of a lease taken after it',
    scenario: 'lease-reset',
    edits: [{ file: 'concurrency/concurrency-limiter.js', from: 'const under = floor === NO_FLOOR ||', to: 'const under = true ||' }],
  },
];
