// reset, penalty and reward under the key's lock (rate/key-controls.ts LockedControls,
// rate/fresh-state.ts, rate/forced-state.ts): planted bugs the locked-reset and locked-controls
// scenarios must find.
export default [
  {
    name: '(planted) a locked reset writes only the head of a log',
    what: "the log's fresh write moves its head word on and clears no entry: they stay and still count",
    scenario: 'locked-reset',
    edits: [{
      file: 'algorithms/sliding-log.js',
      from: 'for (let k = 0; k < permits && Atomics.load(w, at) === fresh; k++) {',
      to: 'for (let k = 0; k < 0; k++) {',
    }],
  },
  {
    name: '(planted) a log reset taken over at the steal age',
    what: "a decision takes a log reset's guarded lock over after claimTimeoutMs, as any other: it admits over the half-cleared "
      + 'log, and the reset, tried again, clears those admissions (the guard of table/slot-lock.ts reverted)',
    scenario: 'locked-reset-takeover',
    budgetS: 30,
    edits: [{ file: 'table/slot-lock.js', from: 'return (cur & GUARDED) === 0 ? ages.stealAfterMs : ages.reclaimAfterMs;', to: 'return ages.stealAfterMs;' }],
  },
  {
    name: '(planted) a locked reset that reports nothing owed',
    what: 'reset answers false whatever the key held: an operator is told the key was already fresh',
    scenario: 'locked-reset',
    edits: [{ file: 'rate/key-controls.js', from: 'return this.#fresh.wrote;', to: 'return false;' }],
  },
  {
    name: '(planted) a log reward that clears its entries and leaves the head',
    what: "SlidingLog.force's reward clears the newest entries but does not move the head back over them: they sit expired "
      + 'behind entries that count, and the search, which takes the expired ones to come first, skips those',
    scenario: 'locked-controls',
    edits: [
      { file: 'algorithms/sliding-log.js', from: 'if (!swap(w, at, head, moved))\n                    return false;', to: '' },
      { file: 'algorithms/sliding-log.js', from: 'k < clear && Atomics.load(w, at) === moved; k++', to: 'k < clear; k++' },
    ],
  },
];
