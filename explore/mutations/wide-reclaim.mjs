// Bugs of the 64-bit GCRA path, the coarse clock, reclaim under a decision and the local tier's
// refusal cache, re-planted in a copy of dist/ (each edit undoes a fix, or removes the protocol step
// its regression tests guard).
export default [
  {
    name: 'coarse clock froze',
    what: 'publish() compares the new reading with the word as a signed 32-bit difference: a word 2^31 units behind '
      + 'never moves (c1fe5e0)',
    scenario: 'coarse-clock',
    edits: [
      // The early return on a word already at or past the reading goes; the loop starts from its own load again.
      {
        file: 'time/coarse-clock.js',
        from: '    let seen = Atomics.load(w, 0);\n    if (fullUnits(seen) >= units)\n        return;\n',
        to: '',
      },
      {
        file: 'time/coarse-clock.js',
        from: '    for (;;) {\n        // compareExchange from the word seen',
        to: '    for (let seen = Atomics.load(w, 0); ((next - seen) | 0) > 0;) {\n        // compareExchange from the word seen',
      },
      { file: 'time/coarse-clock.js', from: 'if (prev === seen || fullUnits(prev) >= units)', to: 'if (prev === seen)' },
    ],
  },
  {
    name: 'stalled publish put an old epoch back',
    what: 'publish() stores its epoch in the slot plainly: one stopped after its check for four epochs puts the old epoch '
      + 'under the word, and every reading falls four epochs behind (found by the explorer)',
    scenario: 'coarse-clock-stall',
    edits: [{
      file: 'time/coarse-clock.js',
      from: '    for (let slot = Atomics.load(w, at); slot !== epoch;) {\n        if (slot > epoch)\n            return;\n'
        + '        const prev = Atomics.compareExchange(w, at, slot, epoch);\n        if (prev === slot)\n            break;\n'
        + '        slot = prev;\n    }\n',
      to: '    w[at] = epoch;\n',
    }],
  },
  {
    name: 'stamp ahead read as stale',
    what: 'isStale reads a stamp a unit ahead of the reading as 2^32 units idle: a full 64-bit key decides as fresh (6e83bc5)',
    scenario: 'gcra-64',
    edits: [
      { file: 'time/stamps.js', from: 'return idle > staleUnits && idle < STAMP_AHEAD;', to: 'return idle > staleUnits;' },
      // Since 2ec4389 a decision raises a reading behind the key's stamp to it first, so the
      // stamp is never ahead when isStale reads it: that raise goes too, or the old bug cannot show.
      { file: 'rate/gcra-wide.js', from: 'if (ahead !== 0)\n            nowMs = this.#readAt(', to: 'if (false)\n            nowMs = this.#readAt(' },
    ],
  },
  {
    name: 'cached slot of a reclaimed key',
    what: 'Gcra32 decides on a cached slot without checking its ctrl word: a key whose slot was reclaimed and reused '
      + 'spends the next key\'s state (the check 3366d3f tests)',
    scenario: 'reclaim',
    edits: [{ file: 'rate/gcra-32.js', from: 'if (w[base + S_CTRL] !== ctrl || tat === DEAD)', to: 'if (tat === DEAD)' }],
  },
  {
    name: 'absent record outlives an insert',
    what: 'LocalTier trusts a thread\'s record of a key found absent after another thread inserted it (3733b42\'s inserts count)',
    scenario: 'local-tier',
    edits: [{ file: 'redis/local-tier.js', from: 'if (cached === inserts && !insert)', to: "if (typeof cached === 'number' && !insert)" }],
  },
  {
    name: 'a width-64 reservation that drops the part interval of its wait',
    what: 'WideGcra\'s reserve computes the wait from whole intervals only (q + cost - burst) * t, without the remainder '
      + 'r of the debt: the reservation acts up to a tick early (a check the reserve-64 scenario makes)',
    scenario: 'reserve-64',
    edits: [{
      file: 'rate/gcra-wide.js',
      from: 'const wait = q + cost >= p.burst ? (q + cost - p.burst) * p.intervalTicks + r : 0;',
      to: 'const wait = q + cost >= p.burst ? (q + cost - p.burst) * p.intervalTicks : 0;',
    }],
  },
];
