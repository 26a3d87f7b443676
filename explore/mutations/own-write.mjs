// An admission of a key of two 32-bit GCRA limits that starts from this thread's own latest
// writes (LockFreeEngine#allowOwn): planted bugs the multi-limit scenarios must find.
export default [
  {
    name: '(planted) an own-write admission past a lost first commit',
    what: "#allowOwn goes on when its first limit's compareExchange failed: another thread's spend of that limit is not counted against this admission",
    scenario: 'multi-limit-own',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'if (!limits[0].commit(w, stateBase + offsets[0]))\n            return OWN_MISSED;',
      to: 'limits[0].commit(w, stateBase + offsets[0]);',
    }],
  },
  {
    name: '(planted) an own-write admission past a lost second commit',
    what: "#allowOwn goes on when its second limit's compareExchange failed: that limit does not count the admission",
    scenario: 'multi-limit-own-second',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'if (two && !limits[1].commit(w, stateBase + offsets[1])) {',
      to: 'if (two && !limits[1].commit(w, stateBase + offsets[1]) && false) {',
    }],
  },
];
