// Per-thread batches of a global cap (rate/global-batch.ts): planted bugs the global-batch
// scenario must find.
export default [
  {
    name: '(planted) a batch taken past the tolerance',
    what: 'take() sizes a batch by its maximum alone, not by the room the cap has left: a thread holds permits the cap never had',
    scenario: 'global-batch',
    edits: [{ file: 'rate/global-batch.js', from: 'const k = Math.min(this.#size, Math.floor((p.toleranceTicks - start) / t));', to: 'const k = this.#size;' }],
  },
  {
    name: '(planted) a permit served from a batch without counting it',
    what: "take() serves a decision from the thread's batch without counting the permit used: a batch serves more than it holds",
    scenario: 'global-batch',
    edits: [{ file: 'rate/global-batch.js', from: '            this.#used += cost;\n            return TAKEN;', to: '            return TAKEN;' }],
  },
  {
    name: '(planted) a batch given back after another charge',
    what: "release() takes the batch's unused permits off whatever the cap's word holds, not only off the batch's own end: another thread's later charge is taken off",
    scenario: 'global-batch-release',
    edits: [{
      file: 'rate/global-batch.js',
      from: 'Atomics.compareExchange(this.#w, this.#area.state, end, (end - left * t) | 0);',
      to: 'Atomics.sub(this.#w, this.#area.state, left * t);',
    }],
  },
];
