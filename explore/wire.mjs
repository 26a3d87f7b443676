// The words a controller and one explored thread talk through: one small SharedArrayBuffer per
// thread, never seen by the code under test. Both sides use the real Atomics captured here, before
// a worker replaces the global one (instrument.mjs).
//
//   int32 words                               float64 / bigint64 values (8 bytes each)
//   +--------+-------+------+------+------+   +----------+----------+----------+----------+
//   | status | grant | kind | buf  | byte |   | arg 0    | arg 1    | result   | reading  |
//   | elem   | step  | bigint bits | stale |           |   +----------+----------+----------+
//   +--------+-------+------+------+------+
//
// A thread that reaches a shared access writes what it is about to do (kind, buffer, byte
// offset, element type, arguments), sets status AT_POINT and waits for the grant word to move.
// The controller moves it (and, at a clock reading, first writes the reading it chose); the
// thread does the access, writes what it read into `result`, and runs to its next access. At a
// plain read the controller may instead hand it an older value of the word (STALE set, the value
// in `reading`): a weak-memory read.

export const Real = Object.freeze({
  Atomics: globalThis.Atomics,
  load: Atomics.load, store: Atomics.store, add: Atomics.add, wait: Atomics.wait, notify: Atomics.notify,
  Int32Array: globalThis.Int32Array, Float64Array: globalThis.Float64Array, BigInt64Array: globalThis.BigInt64Array,
});

export const STATUS = 0;
export const GRANT = 1;
export const KIND = 2;
export const BUF = 3;
export const BYTE = 4;
export const ELEM = 5;
/** The global step at which the controller last granted this thread. */
export const STEP = 6;
/** One bit per value slot: the slot holds a bigint's 64 bits, not a double. */
export const BIGINT_BITS = 7;
/** 1 when the controller answers the thread's plain read itself (a stale value, in READING). */
export const STALE = 8;
/** Value slots, in 8-byte units from byte 64. */
export const ARG0 = 0;
export const ARG1 = 1;
export const RESULT = 2;
export const READING = 3;
const VALUES_BYTE = 64;
export const CONTROL_BYTES = VALUES_BYTE + 8 * 4;

/** Thread states. */
export const RUNNING = 0;
export const AT_POINT = 1;
export const DONE = 2;
export const FAILED = 3;
export const IDLE = 4;

/** What a thread is about to do at a point. */
export const KINDS = [
  'load', 'store', 'cas', 'add', 'sub', 'and', 'or', 'xor', 'exchange', 'read', 'write', 'wait', 'notify', 'clock', 'ready',
];
export const K = Object.fromEntries(KINDS.map((k, i) => [k, i]));
/** Element types of shared views. */
export const ELEMS = ['Int32', 'BigInt64', 'Float64', 'Uint8', 'Uint32', 'Int8', 'Int16', 'Uint16', 'Float32', 'BigUint64', 'Uint8Clamped'];

/** Views of one control buffer. */
export class Control {
  constructor(buffer) {
    this.buffer = buffer;
    this.i32 = new Real.Int32Array(buffer, 0, VALUES_BYTE / 4);
    this.f64 = new Real.Float64Array(buffer, VALUES_BYTE, 4);
    this.b64 = new Real.BigInt64Array(buffer, VALUES_BYTE, 4);
  }

  static create() {
    return new Control(new SharedArrayBuffer(CONTROL_BYTES));
  }

  put(slot, value) {
    const bits = this.i32[BIGINT_BITS];
    if (typeof value === 'bigint') {
      this.b64[slot] = BigInt.asIntN(64, value);
      this.i32[BIGINT_BITS] = bits | (1 << slot);
    } else {
      this.f64[slot] = value === undefined ? NaN : Number(value);
      this.i32[BIGINT_BITS] = bits & ~(1 << slot);
    }
  }

  get(slot) {
    return (this.i32[BIGINT_BITS] & (1 << slot)) !== 0 ? this.b64[slot] : this.f64[slot];
  }

  /** Spins a little, then sleeps, until `word` no longer holds `value`. */
  waitWhile(word, value) {
    for (let spins = 0; Real.load(this.i32, word) === value; spins++) {
      if (spins > 2000) Real.wait(this.i32, word, value, 1000);
    }
  }
}
