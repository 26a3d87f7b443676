// The table's insert protocol (src/table/insert.ts) and its lookups and compaction (table.ts, compaction.ts).
export default [
  {
    name: 'duplicate insert',
    what: 'an inserter publishes without re-scanning the chain for the same key claimed elsewhere',
    scenario: 'gcra-32-insert',
    edits: [{ file: 'table/insert.js', from: '        for (let i = 0; i < S; i++) {\n            if (i === pos)', to: '        for (let i = 0; i < 0; i++) {\n            if (i === pos)' }],
  },
  {
    name: 'claim judged by an older reading',
    // gcra-64: since a 32-bit first check is admitted by its insert, the schedule that showed the
    // bug on gcra-32-insert (an admission decided on the slot after its insert, then the state
    // reset under it) no longer exists there, and 90 s of search found none other; WideGcra still
    // decides after its insert, and the search finds it there in about 2 s.
    budgetS: 30,
    what: 'a claim stamped after the reading that judges it reads as 2^29 - 1 ms old (found by the explorer)',
    scenario: 'gcra-64',
    edits: [
      { file: 'table/insert.js', from: 'return age >= CLAIM_AGE_LIMIT ? 0 : age;', to: 'return age;' },
      // Since b7c2404 an insert claims the slot its lookup passed, reading its clock after the
      // lookup's loads, which closes the two-thread path to the bug; the insert's own scan, as
      // before that change, opens it again.
      { file: 'table/insert.js', from: 'let pos = missFree;', to: 'let pos = -1;' },
    ],
  },
  {
    name: 'a claim reused at 30x a small claimTimeoutMs',
    budgetS: 30, // found after 9.9 s of CI-bounds DFS (a schedule of cost 2)
    what: 'the reuse age without its 30 s floor: at claimTimeoutMs 1 a claim 30 ms old is taken over, and its stalled inserter writes its fresh state over the key that took the slot (found by a kill storm in CI)',
    scenario: 'insert-stall',
    edits: [{ file: 'table/insert.js', from: 'export const REUSE_FLOOR_MS = 30_000;', to: 'export const REUSE_FLOOR_MS = 0;' }],
  },
  {
    name: 'publish past a cleared slot',
    what: 'an inserter publishes though a slot before its own in the chain is free again (a compaction may be clearing it)',
    scenario: 'compaction',
    edits: [{ file: 'table/insert.js', from: 'if (i < pos && (state === EMPTY || state === TOMB)) {', to: 'if (false) {' }],
  },
  {
    name: '(planted) a compaction that does not count what it clears',
    what: 'compactStripe turns tombstones EMPTY without counting them down: the tombstones gauge drifts up',
    scenario: 'compaction',
    edits: [{ file: 'table/compaction.js', from: 't.count(start, C_TOMBS, -cleared);', to: 'void 0;' }],
  },
  {
    name: '(planted) a publish that does not count its key',
    what: 'an insert publishes without counting the key live: the live-keys gauge drifts down',
    scenario: 'gcra-32-insert',
    edits: [{ file: 'table/insert.js', from: 't.count(slot, C_LIVE, 1);', to: 'void 0;' }],
  },
  {
    name: 'compaction ignores claims',
    what: 'a compaction clears a tombstone while a claim whose chain crosses it is still unpublished',
    scenario: 'compaction',
    edits: [{ file: 'table/compaction.js', from: 'if (state === BUSY && !t.cancelExpired(base, c))', to: 'if (false)' }],
  },
  {
    name: 'long keys told apart by their first 24 bytes',
    what: 'a lookup takes a long key whose hash, length and slot bytes match for the key, without comparing its tail',
    scenario: 'long-key-insert',
    edits: [{ file: 'table/table.js', from: 'return n === inline || this.#tailEquals(', to: 'return true || this.#tailEquals(' }],
  },
  {
    name: 'one heap record for two slots',
    what: 'two inserters take records from the heap top with a plain read and write, so both get the same words',
    scenario: 'long-key-insert',
    edits: [{ file: 'table/key-heap.js', from: 'if (Atomics.compareExchange(w, K_TOP, top, top + size) === top)', to: 'if ((w[K_TOP] = top + size) > 0)' }],
  },
  {
    name: '(planted) a first admission that its fresh state does not count',
    what: "a new key's insert admits the first check (Gcra32.pendingCost) but writes a fresh state without its cost: the key admits its burst again",
    scenario: 'gcra-32-insert',
    edits: [{ file: 'rate/gcra-32.js', from: 'let tat = (this.#readTicks + next) | 0;', to: 'let tat = this.#readTicks | 0;' }],
  },
  {
    name: '(planted) a first admission taken from an insert that was not published',
    what: "a check whose insert's publish failed (its claim cancelled) answers by that insert's admission, on the copy that won, without counting it there",
    scenario: 'insert-cancel',
    edits: [{ file: 'rate/rate-limiter.js', from: 'if (index.insertedLast && one.tookFresh(entry)) {', to: 'if (one.tookFresh(entry)) {' }],
  },
  {
    name: 'slab: duplicate insert',
    what: 'a SLAB inserter publishes without re-scanning its chain for another entry of the same key',
    scenario: 'slab-insert',
    edits: [{ file: 'table/slab-directory.js', from: '        for (let i = 0; i < S; i++) {\n            if (i === pos)', to: '        for (let i = 0; i < 0; i++) {\n            if (i === pos)' }],
  },
  {
    // Missed at CI bounds: the schedule needs a lookup to win a reclaim's last step from the
    // sweep, the compaction to run before its insert, and that insert to take the freed slot, with
    // four slots. test/table/slab.test.ts ('keeps a stale entry reachable') stages it directly.
    name: 'slab: compaction cuts a stale entry off',
    what: 'a SLAB compaction keeps only the chains of LIVE slots\' entries, so a freed slot\'s stale entry can be cut off from its home and never cleared',
    scenario: 'slab-stale',
    edits: [{ file: 'table/slab-sweep.js', from: '            for (let j = ix.home(hash) & (S - 1); j !== i; j = (j + 1) & (S - 1))', to: '            if ((c & 3) === LIVE) for (let j = ix.home(hash) & (S - 1); j !== i; j = (j + 1) & (S - 1))' }],
  },
  {
    name: 'slab: a reused slot keeps its old entry',
    what: 'a SLAB insert that takes a freed slot does not clear the entry its last key left',
    scenario: 'slab-reuse',
    edits: [{ file: 'table/slab-directory.js', from: 'if ((from & 3) !== EMPTY)', to: 'if (false)' }],
  },
  {
    name: 'an insert below the reclaim floor',
    what: 'an insert writes its fresh state at its own reading, behind the reading a sweep reclaimed the key at: a second admission '
      + 'in the window of the first (found by the deep explorer run of 2026-12-06 on fixed-window)',
    scenario: 'reclaim-floor',
    deep: true, // two clock moves: the window's edge, then a step back
    edits: [{ file: 'table/insert.js', from: "        t.noteFloor(); // after the scans that found the key missing: a reclaim's floor reaches initSlot\n", to: '' }],
  },
];
