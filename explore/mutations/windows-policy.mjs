// The lock-free multi-limit engine, the window algorithms' reclaim, and PolicyLimiter's rule
// changes: bugs once found and fixed, each re-planted by reverting its fix in the built code.
export default [
  {
    name: 'lastSec none was a real second',
    what: "the lastSec bound's 'none' was -1, a real second for readings in [-1000, 0) ms: a fresh SlotRef skipped the stamp's load and raise (fix 6daca44, flag since fdb6c02)",
    scenario: 'multi-limit',
    edits: [
      // A SlotRef's record keeps its second as the part above its low 32 bits and those bits (-1
      // is -1 * 2^32 + (2^32 - 1)), written for every location a lookup returns (fillRecord).
      { file: 'table/slot-ref.js', from: '    w[at + R_SEC_HI] = 0;\n    w[at + R_SEC_LO] = 0;', to: '    w[at + R_SEC_HI] = -1;\n    w[at + R_SEC_LO] = -1;' },
      // Since 2ec4389 the guess also needs the loaded word to be this thread's own write, which a
      // fresh SlotRef's 0 rarely is: that check goes too, or the old bug cannot show.
      {
        file: 'rate/lockfree-engine.js',
        from: 'const guess = first !== null && first.loaded === ref.tat && ref.knowsSec(this.#secHi, this.#secLo);',
        to: 'const guess = ref.sec === this.#sec;',
      },
      { file: 'rate/lockfree-engine.js', from: '    #sec = 0;', to: '    #sec = -2;' },
    ],
  },
  {
    name: 'sweep reopened a window',
    what: "a cancelled reservation left 'next window, count 0', which idle() took for a fresh key: sweep() reclaimed it and the reading's window admitted again (fix e3d7f24)",
    scenario: 'fixed-window',
    edits: [{ file: 'algorithms/fixed-window-32.js', from: 'return this.#count === 0 && !this.#ahead;', to: 'return this.#count === 0;' }],
  },
  {
    name: 'rule change restarted a pair',
    what: 'a thread holding older rules reshaped a pair already moved to newer ones back to its rule, starting it fresh again (fix f77703e)',
    scenario: 'policy-rules',
    edits: [{ file: 'policy/policy-limiter.js', from: 'if (stored !== NO_SHAPE && newer(storedVersion, this.#version)) {', to: 'if (false) {' }],
  },
  {
    name: 'a window block that stores its end over a longer one',
    what: "BlockUntil.commit stores a block's end instead of its compareExchange from the snapshot: a shorter block that "
      + 'read the word before a longer one landed writes over it, and the key passes before the longer block ends (planted)',
    scenario: 'window-block',
    edits: [{
      file: 'algorithms/block-until.js',
      from: 'return Atomics.compareExchange(w, at, this.#until, this.#next) === this.#until;',
      to: 'Atomics.store(w, at, this.#next);\n        return true;',
    }],
  },
  {
    name: 'a policy window rule that lets a blocked pair pass',
    what: "BlockUntil.check admits while the block runs: a PolicyLimiter pair under a fixed-window rule made with maxBlockMs "
      + 'passes after a block() on it returned (planted: shows policy-window-block judges the block word)',
    scenario: 'policy-window-block',
    edits: [{ file: 'algorithms/block-until.js', from: 'v.allowed = wait === 0 || cost <= 0;', to: 'v.allowed = true;' }],
  },
];
