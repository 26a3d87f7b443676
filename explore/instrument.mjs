// Runs inside an explored worker, before the code under test is imported: every access that code
// makes to a SharedArrayBuffer, and every clock reading, becomes a point at which the thread stops
// until the controller lets it go on. Nothing in src/ knows about it:
// - the typed-array constructors are replaced by ones that return, for a view of a
//   SharedArrayBuffer, a Proxy whose element reads and writes are points ('read', 'write');
// - the global Atomics is replaced by one whose operations take those proxies, make a point of
//   the operation, then run the real one on the real view;
// - performance.now() and Date.now() are points ('clock') that return the reading the
//   controller chose.
// An Atomics call on a shared view that did not come through here (one a message carried in, for
// example) throws: the explorer refuses to run code whose accesses it cannot see.
import { ELEMS, K, Real } from './wire.mjs';

const TYPED = ['Int32Array', 'BigInt64Array', 'Float64Array', 'Uint8Array', 'Uint32Array', 'Int8Array', 'Int16Array', 'Uint16Array', 'Float32Array', 'BigUint64Array', 'Uint8ClampedArray'];

/** proxy -> { target, buf, byte0, elem, bpe } */
const views = new WeakMap();
/** SharedArrayBuffer -> id (the run names the buffers it hands over; others get local ids). */
let bufferIds = new WeakMap();
let localIds = 1000;

function isIndex(prop) {
  if (typeof prop !== 'string') return false;
  const n = Number(prop);
  return Number.isInteger(n) && n >= 0 && String(n) === prop;
}

/**
 * Installs the hooks. `point(kind, buf, byte, elem, a0, a1)` stops the thread and returns, for a
 * 'clock' point, the reading to use (at a plain read, an older value to return instead of the
 * word's, or undefined); `after(value)` gets what the access then read (or wrote)
 * and returns it.
 */
export function instrument(point, after) {
  const idOf = (buffer) => {
    let id = bufferIds.get(buffer);
    if (id === undefined) bufferIds.set(buffer, (id = localIds++));
    return id;
  };

  const wrap = (target, elem) => {
    const info = { target, buf: idOf(target.buffer), byte0: target.byteOffset, elem, bpe: target.BYTES_PER_ELEMENT };
    const at = (i) => info.byte0 + i * info.bpe;
    const read = (i) => {
      const stale = point(K.read, info.buf, at(i), elem);
      return after(stale === undefined ? target[i] : stale);
    };
    const write = (i, v) => {
      point(K.write, info.buf, at(i), elem, v);
      target[i] = v;
      after(target[i]);
    };
    const methods = {
      subarray: (a, b) => wrap(target.subarray(a, b), elem),
      fill: (v, a = 0, b = target.length) => {
        const n = target.length;
        const from = a < 0 ? Math.max(n + a, 0) : Math.min(a, n);
        const to = b < 0 ? Math.max(n + b, 0) : Math.min(b, n);
        for (let i = from; i < to; i++) write(i, v);
        return proxy;
      },
      set: (source, offset = 0) => {
        for (let i = 0; i < source.length; i++) write(offset + i, source[i]);
      },
      slice: (a, b) => {
        const copy = target.slice(a, b); // its values are re-read through points below
        const from = a === undefined ? 0 : a < 0 ? Math.max(target.length + a, 0) : a;
        for (let i = 0; i < copy.length; i++) copy[i] = read(from + i);
        return copy;
      },
    };
    const plain = new Set(['length', 'buffer', 'byteOffset', 'byteLength', 'BYTES_PER_ELEMENT', 'constructor']);
    const proxy = new Proxy(target, {
      get(t, prop) {
        if (isIndex(prop)) return read(Number(prop));
        if (plain.has(prop) || typeof prop === 'symbol' && prop !== Symbol.iterator) return t[prop];
        if (Object.hasOwn(methods, prop)) return methods[prop];
        if (prop === Symbol.iterator || prop === 'values') return function* values() { for (let i = 0; i < t.length; i++) yield read(i); };
        throw new Error(`explorer: unsupported access .${String(prop)} on a shared ${elem}Array`);
      },
      set(t, prop, value) {
        if (isIndex(prop)) { write(Number(prop), value); return true; }
        throw new Error(`explorer: unsupported write .${String(prop)} on a shared ${elem}Array`);
      },
    });
    views.set(proxy, info);
    return proxy;
  };

  for (const name of TYPED) {
    const Real_ = globalThis[name];
    const elem = name.replace(/Array$/, '');
    if (!ELEMS.includes(elem)) throw new Error(`explorer: unknown element type ${elem}`);
    const Patched = function (...args) {
      if (new.target === undefined) throw new TypeError(`Constructor ${name} requires 'new'`);
      const array = Reflect.construct(Real_, args, new.target === Patched ? Real_ : new.target);
      return array.buffer instanceof SharedArrayBuffer ? wrap(array, elem) : array;
    };
    Object.setPrototypeOf(Patched, Real_);
    Object.defineProperty(Patched, 'prototype', { value: Real_.prototype });
    Object.defineProperty(Patched, 'name', { value: name });
    globalThis[name] = Patched;
  }
  globalThis.DataView = new Proxy(globalThis.DataView, {
    construct(T, args) {
      if (args[0] instanceof SharedArrayBuffer) throw new Error('explorer: a DataView of a shared buffer is not instrumented');
      return Reflect.construct(T, args);
    },
  });

  const unwrap = (array, op) => {
    const info = views.get(array);
    if (info === undefined) {
      if (array?.buffer instanceof SharedArrayBuffer) throw new Error(`explorer: Atomics.${op} on a shared view the explorer does not see`);
      return null; // a private view: no point
    }
    return info;
  };
  const R = Real.Atomics;
  const op1 = (name) => (array, index, value) => {
    const info = unwrap(array, name);
    if (info === null) return R[name](array, index, value);
    point(K[name], info.buf, info.byte0 + index * info.bpe, info.elem, value);
    return after(R[name](info.target, index, value));
  };
  const A = {
    load(array, index) {
      const info = unwrap(array, 'load');
      if (info === null) return R.load(array, index);
      point(K.load, info.buf, info.byte0 + index * info.bpe, info.elem);
      return after(R.load(info.target, index));
    },
    store: op1('store'), add: op1('add'), sub: op1('sub'), and: op1('and'), or: op1('or'), xor: op1('xor'), exchange: op1('exchange'),
    compareExchange(array, index, expected, replacement) {
      const info = unwrap(array, 'compareExchange');
      if (info === null) return R.compareExchange(array, index, expected, replacement);
      point(K.cas, info.buf, info.byte0 + index * info.bpe, info.elem, expected, replacement);
      return after(R.compareExchange(info.target, index, expected, replacement));
    },
    // A wait is a point and returns at once, as a wait that timed out may: the explored thread
    // must never block, or the schedule could not go on.
    wait(array, index, value) {
      const info = unwrap(array, 'wait');
      if (info === null) return R.wait(array, index, value, 0);
      point(K.wait, info.buf, info.byte0 + index * info.bpe, info.elem, value);
      after(R.load(info.target, index));
      return R.load(info.target, index) === value ? 'timed-out' : 'not-equal';
    },
    waitAsync() { throw new Error('explorer: Atomics.waitAsync is not explored'); },
    notify(array, index, count) {
      const info = unwrap(array, 'notify');
      if (info === null) return R.notify(array, index, count);
      point(K.notify, info.buf, info.byte0 + index * info.bpe, info.elem);
      return after(0);
    },
    isLockFree: (n) => R.isLockFree(n),
    pause: (n) => R.pause?.(n),
  };
  Object.defineProperty(globalThis, 'Atomics', { value: Object.freeze(A), writable: true, configurable: true });

  const now = () => point(K.clock, -1, 0, 'clock');
  performance.now = now;
  Date.now = now;
}

/** Names the buffers a run hands over (ids 0, 1, ...), and forgets every other. */
export function nameBuffers(buffers) {
  bufferIds = new WeakMap();
  localIds = 1000;
  buffers.forEach((b, i) => bufferIds.set(b, i));
}
