// An admission that starts from this thread's own latest writes (LockFreeEngine#allowOwn):
// planted bugs the own-write scenarios (_own.mjs) and global-batch must find.
export default [
  {
    name: '(planted) an own-write admission past a lost commit',
    what: "#allowOwn goes on when its GCRA limit's compareExchange failed (a key under a batched cap): another thread's spend of the limit is not counted against this admission",
    scenario: 'own-write-cap',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'const landed = a.commit(w, at);',
      to: 'const landed = a.commit(w, at) || true;',
    }],
  },
  {
    name: '(planted) an own-write window admission past a lost commit',
    what: "#allowOwn goes on when a fixed window's compareExchange failed: another thread's spend of the window is not counted against this admission",
    scenario: 'own-write-window',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'const landed = a.commit(w, at);',
      to: 'const landed = a.commit(w, at) || true;',
    }],
  },
  {
    name: "(planted) an own-write admission that takes nothing from the cap's batch",
    what: "#allowOwn commits the key's limits without serving the global cap from the thread's batch: the cap does not count the admission",
    scenario: 'global-batch',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'return batch === null || batch.take(m.ms, cost, this.#clock) === TAKEN;',
      to: 'return true;',
    }],
  },
  {
    name: '(planted) an own-write admission on two limits past a lost commit',
    what: "#allowOwnTwo commits each limit from its own write and goes on whatever the compareExchanges say: another thread's spend of either limit is not counted against this admission",
    scenario: 'own-write-second',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'if (!set.commit(this.#key, this.#area, m, m.sec, cost, this.#takeBack, this.#stillOurs)) {',
      to: 'if (!(limits[0].commit(this.#w, stateBase + offsets[0]) | limits[1].commit(this.#w, stateBase + offsets[1]) | 1)) {',
    }],
  },
  {
    name: '(planted) an own-write admission on two windows past a lost commit',
    what: 'the same on two fixed windows: #allowOwnTwo goes on whatever the compareExchanges say',
    scenario: 'own-write-windows',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'if (!set.commit(this.#key, this.#area, m, m.sec, cost, this.#takeBack, this.#stillOurs)) {',
      to: 'if (!(limits[0].commit(this.#w, stateBase + offsets[0]) | limits[1].commit(this.#w, stateBase + offsets[1]) | 1)) {',
    }],
  },
  {
    name: "(planted) a lost limit decided again on its key's next incarnation",
    what: "#allowOwnTwo's commits without LimitSet.commit's holds: a record older than a reclaim decides a limit that lost its race again on the key's next incarnation in the same slot and writes there, then the relocated decision counts the request again",
    scenario: 'own-write-reclaim',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'if (!set.commit(this.#key, this.#area, m, m.sec, cost, this.#takeBack, this.#stillOurs)) {',
      to: 'if (!set.commit(this.#key, this.#area, m, m.sec, cost, this.#takeBack)) {',
    }],
  },
  {
    name: "(planted) a limit decided again from loads on its key's next incarnation",
    what: "#allowGcra's commits without LimitSet.commit's holds: a limit that lost its race to a reclaim and an insert of the key into the same slot is decided again and written on the key's next incarnation, then the relocated decision counts the request again",
    scenario: 'reclaim-lost-race',
    edits: [{
      file: 'rate/lockfree-engine.js',
      from: 'if (!this.#set.commit(this.#key, this.#area, m, lastSec, cost, this.#takeBack, this.#stillOurs)) {',
      to: 'if (!this.#set.commit(this.#key, this.#area, m, lastSec, cost, this.#takeBack)) {',
    }],
  },
];
