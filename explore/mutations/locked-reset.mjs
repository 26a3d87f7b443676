// reset, penalty and reward under the key's lock (rate/key-controls.ts LockedControls,
// rate/fresh-state.ts, rate/forced-state.ts): planted bugs the locked-reset and locked-controls
// scenarios must find.
export default [
  {
    name: '(planted) a locked reset writes only the first word of each limit',
    what: "the fresh write stops after each limit's first word: a sliding log's head goes back, its entries stay and still count",
    scenario: 'locked-reset',
    edits: [{ file: 'rate/fresh-state.js', from: 'for (; j < a.stateWords; j++) {', to: 'for (; j < Math.min(a.stateWords, 1); j++) {' }],
  },
  {
    name: '(planted) a locked reset that reports nothing owed',
    what: 'reset answers false whatever the key held: an operator is told the key was already fresh',
    scenario: 'locked-reset',
    edits: [{ file: 'rate/key-controls.js', from: 'return this.#fresh.wrote;', to: 'return false;' }],
  },
  {
    name: 'a locked reset answered by its last try alone',
    what: "reset's answer is the last try's judgement: a try taken over after its write landed, then a try that finds the key fresh, answer false",
    scenario: 'locked-reset',
    deep: true,
    edits: [{ file: 'rate/key-controls.js', from: 'if (!owes)\n            return true; // already fresh', to: 'if (!owes) {\n            this.#fresh.wrote = false;\n            return true;\n        } //' }],
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
