// reset, penalty and reward under the key's lock (rate/key-controls.ts LockedControls,
// rate/fresh-state.ts, rate/forced-state.ts): planted bugs the locked-reset and locked-controls
// scenarios must find.
export default [
  {
    name: '(planted) a locked reset writes only the head of a log',
    what: "the log's fresh write moves its head word on and clears no entry: they stay and still count",
    scenario: 'locked-reset',
    edits: [{ file: 'algorithms/sliding-log.js', from: 'for (let k = 0; k < permits; k++) {\n                const i', to: 'for (let k = 0; k < 0; k++) {\n                const i' }],
  },
  {
    name: 'a locked reset written again in full on its next try',
    what: 'a reset try that fails on a later limit (or a probe after it, its lock taken over) writes every limit fresh again: '
      + 'the admissions a decision made over the lock in between are cleared, the key reset twice',
    scenario: 'locked-reset-takeover',
    budgetS: 30,
    edits: [{ file: 'rate/fresh-state.js', from: 'for (let i = this.landed; i < g.algorithms.length; i++) {', to: 'for (let i = 0; i < g.algorithms.length; i++) {' }],
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
