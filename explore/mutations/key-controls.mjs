// The per-key controls (rate/rate-limiter.ts get, table/table-site.ts peek; rate/key-controls.ts):
// planted bugs the key-get and key-controls scenarios must find.
export default [
  {
    name: '(planted) get inserts the key',
    what: 'get looks the key up with the inserting lookup: a key only read takes a slot',
    scenario: 'key-get',
    // peek's own line: peekAgain (since a later commit) has the same one.
    edits: [{ file: 'table/table-site.js', from: '    peek(key) {\n        return this.index.peek(key);', to: '    peek(key) {\n        return this.index.cached(key) ?? this.index.locate(key);' }],
  },
  {
    name: '(planted) get spends',
    what: 'get probes with a cost of 1 instead of 0: reading a key spends from it',
    scenario: 'key-get',
    edits: [{ file: 'rate/rate-limiter.js', from: 'if (one.decide(entry, 0) === RELOCATE)', to: 'if (one.decide(entry, 1) === RELOCATE)' }],
  },
  {
    name: '(planted) reward gives back twice its cost',
    what: 'a reward gives back 2 x cost intervals: the key admits more than the model allows',
    scenario: 'key-controls',
    // The reward's amount is math/gcra.ts's unspentTicks since c07fdeb (a spend's give-back bounds it).
    edits: [{ file: 'rate/gcra-32.js', from: 'unspentTicks(cost, arg, this.#readMs, p)', to: 'unspentTicks(2 * cost, arg, this.#readMs, p)' }],
  },
  {
    name: '(planted) a block without the tolerance',
    what: "a block's debt is the block alone, not the block plus the tolerance less an interval: a request passes before it ends",
    scenario: 'key-controls',
    // The block's debt is math/gcra.ts's blockDebtTicks since f90126b (Gcra32 and the engines' force share it).
    edits: [{ file: 'math/gcra.js', from: '+ 1 + p.toleranceTicks - p.intervalTicks;', to: '+ 1;' }],
  },
  {
    name: '(planted) a width-64 block without the tolerance',
    what: "WideGcra's block debt is the block alone: a request passes before the block ends",
    scenario: 'key-block-64',
    edits: [{ file: 'rate/gcra-wide.js', from: 'mul(p.burst - 1, p.intervalTicks, this.#n)', to: 'mul(0, p.intervalTicks, this.#n)' }],
  },
  {
    name: 'an old TAT under a raised stamp read as debt',
    what: 'keyDebtOf without its bound, and a block past the horizon refused as before 21bf176: while a decision has raised '
      + 'lastSec and not yet written tat, a key idle 2^31 ticks or more reads as owing up to 2^31 ticks, and block(k, 700) '
      + 'throws RangeError (deep run 18:4 21:1 33:3 of 2026-12-03)',
    scenario: 'key-controls',
    deep: true,
    edits: [
      { file: 'math/gcra.js', from: 'if (ahead > MAX_AHEAD_TICKS && ahead > MAX_AHEAD_TICKS + Math.ceil(1e12 / p.tickPs) + 1)', to: 'if (false)' },
      { file: 'rate/gcra-32.js', from: 'if (debt < arg)\n                        outcome = TOO_LONG;', to: 'if (true)\n                        outcome = TOO_LONG;' },
    ],
  },
  {
    name: '(planted) a block on several limits that only adds a tick',
    what: "NarrowGcra.force's block leaves each limit's debt one tick up instead of raising it to the block: requests pass during the block",
    scenario: 'limits-controls',
    edits: [{ file: 'algorithms/gcra.js', from: 'Math.max(d + 1, block)', to: 'd + 1' }],
  },
  {
    name: '(planted) a penalty on the first limit only',
    what: 'LimitSet forces only the first limit of a penalty or block and checks the others: the second limit never spends the penalty',
    scenario: 'limits-controls',
    edits: [{
      file: 'rate/limit-set.js',
      from: 'if (this.forcing !== null && !probe) {',
      to: 'if (this.forcing !== null && !probe && i === 0) {',
    }],
  },
  {
    name: '(planted) a policy penalty or block written to the first limit only',
    what: 'forceUnderLock commits only the first limit of the rule: the second never spends the penalty nor holds the block',
    scenario: 'policy-controls',
    deep: true,
    edits: [{
      file: 'rate/forced-state.js',
      from: 'for (let i = progress.landed; i < n; i++) {\n        if (!g.algorithms[i].commit(',
      to: 'for (let i = progress.landed; i < 1; i++) {\n        if (!g.algorithms[i].commit(',
    }],
  },
  {
    name: '(planted) a policy reward that gives back twice its cost',
    what: "the 64-bit force gives a reward's cost back twice: the pair admits more than the model allows",
    scenario: 'policy-controls',
    edits: [{ file: 'algorithms/gcra-64.js', from: 'mul(-cost, t, spend);', to: 'mul(-2 * cost, t, spend);' }],
  },
  {
    name: '(planted) an undo that does not look at the give-back epoch',
    what: 'a decision whose second limit refused takes its first commit back even after a reward gave it back: '
      + 'another decision that wrote the same word loses its spend, and the key admits past its limit',
    scenario: 'limits-give-back',
    edits: [{ file: 'rate/lockfree-engine.js', from: 'if (Atomics.load(w, this.#area.state + this.#epochOffset) === this.#area.epoch)', to: 'if (true)' }],
  },
  {
    name: '(planted) a reset that writes a limit again after another landed',
    what: 'LockFreeEngine.#writeOnce reads and decides again when any limit lost its race, not only while none landed: '
      + "the reset clears a decision's spend that came after it (it had seen the first window reset)",
    scenario: 'window-reset',
    edits: [{ file: 'rate/lockfree-engine.js', from: 'else if (!landed) {', to: 'else {' }],
  },
  {
    name: '(planted) a window penalty outside the give-back guard',
    what: "a penalty on windows forced as on GCRA, without the key's guard and epoch: a decision that committed the first window "
      + 'before it and takes that back after it subtracts from the count the penalty left full, and the window admits once more',
    scenario: 'window-penalty',
    edits: [{ file: 'rate/lockfree-engine.js', from: 'return this.#givingBack(ref.base, ref.ctrl, stateBase, RELOCATE, () => this.force(ref, stateBase, cost, -1));', to: 'return this.force(ref, stateBase, cost, -1);' }],
  },
  {
    name: "(planted) a spend's give-back that ignores the key's epoch",
    what: "LockFreeEngine.giveBack with a spend's mark checks the slot but not the epoch: a window give-back of a spend made before a reset "
      + 'takes it from the admissions the fresh state counted, and the window admits once more',
    scenario: 'window-give-back',
    edits: [
      { file: 'rate/lockfree-engine.js', from: 'Atomics.load(this.#w, stateBase + this.#epochOffset) !== mark.epoch', to: 'false' },
      { file: 'rate/lockfree-engine.js', from: 'mark.epoch !== Atomics.load(this.#w, stateBase + this.#epochOffset)', to: 'false' },
    ],
  },
  {
    name: '(planted) a GCRA give-back with no time bound',
    what: "a spend's give-back returns its whole cost whatever drained since its admission (before c07fdeb): after a jump of three "
      + 'intervals and two admissions at one instant, the give-back lets a third pass at a burst of 2',
    scenario: 'gcra-give-back',
    edits: [{ file: 'math/gcra.js', from: '    if (!(nowMs > sinceMs))\n        return all;\n    // Every interval drained (the estimate', to: '    if (true)\n        return all;\n    // Every interval drained (the estimate' }],
  },
  {
    name: "(planted) the engine's give-back without the spend's reading",
    what: "LockFreeEngine.giveBack ignores the mark's reading: each GCRA limit gives back its whole cost, drained or not (before c07fdeb)",
    scenario: 'limits-spend-give-back',
    // Found in 5.7 s of DFS (CI's 2 s budget ends before the schedule: a jump, two decisions, the give-back).
    budgetS: 15,
    edits: [{ file: 'rate/lockfree-engine.js', from: 'set.rewardSinceMs = mark === null ? Infinity : mark.ms;', to: 'set.rewardSinceMs = Infinity;' }],
  },
];
