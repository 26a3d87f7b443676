// reset under the key's lock (rate/key-controls.ts LockedControls, rate/fresh-state.ts): planted
// bugs the locked-reset scenario must find.
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
];
