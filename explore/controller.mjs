// Drives the explored threads of one scenario through one schedule. The threads are real
// workers running the real code (worker.mjs); exactly one of them moves at a time, from one
// shared access to the next, so a run is a function of its schedule: the same choices give the
// same run, access for access.
//
// At every step the controller lists its options: which stopped thread goes next and, when that
// thread is about to read the clock, what the clock says. The first option is always "the thread
// that moved last goes on, and time stays"; the others cost a preemption, a time move, or both.
//
// Weak memory: a plain (non-Atomics) read of an int32 word may also return the value the word
// held before its latest write (an option that costs a stale read), when that write could not
// have happened before the read in the JS memory model's sense: it was made by another thread,
// after the reading thread's last Atomics operation. (Any synchronisation that would order the
// write before the read needs an Atomics operation of the reader after it.) This under-
// approximates what the model allows: every stale value offered is one a real run may see.
// A chooser (search.mjs) picks one. What the run did comes back as an Execution: the trace of
// every access, each thread's calls (their readings and steps) and return values.
import { MessageChannel, receiveMessageOnPort, Worker } from 'node:worker_threads';
import { libraryOf } from './lib.mjs';
import {
  ARG0, ARG1, AT_POINT, BUF, BYTE, Control, DONE, ELEM, ELEMS, GRANT, IDLE, K, KIND, KINDS, READING, Real,
  RESULT, RUNNING, STALE, STATUS, STEP,
} from './wire.mjs';

const WORKER = new URL('./worker.mjs', import.meta.url);
const WRITES = new Set([K.store, K.cas, K.add, K.sub, K.and, K.or, K.xor, K.exchange, K.write]);
/** A thread that read words it had read before, unchanged, this often since the last write waits on others. */
const SPIN_REPEATS = 8;

export class ScheduleAborted extends Error {}

/** A pool of explored threads, reused run after run. */
export class Explorer {
  #threads = [];
  #lib;

  /** `lib`: the URL of the build under test (dist/index.js or a mutated copy). */
  constructor(threads, lib) {
    this.#lib = lib;
    for (let t = 0; t < threads; t++) this.#threads.push(this.#spawn());
  }

  #spawn() {
    const control = Control.create();
    const { port1, port2 } = new MessageChannel();
    const worker = new Worker(WORKER, { workerData: { control: control.buffer, port: port2 }, transferList: [port2] });
    worker.unref();
    let error = null;
    worker.on('error', (e) => { error = e; });
    return { control, port: port1, worker, error: () => error };
  }

  get lib() {
    return this.#lib;
  }

  async close() {
    await Promise.all(this.#threads.map((t) => t.worker.terminate()));
    this.#threads = [];
  }

  /** Replaces every thread after a run that was cut short (its threads are stuck mid-call). */
  async #respawn(n) {
    await this.close();
    for (let t = 0; t < n; t++) this.#threads.push(this.#spawn());
  }

  #waitStopped(th) {
    const i32 = th.control.i32;
    for (let spins = 0; Real.load(i32, STATUS) === RUNNING; spins++) {
      if (spins > 2000) {
        Real.wait(i32, STATUS, RUNNING, 1000);
        const e = th.error();
        if (e !== null) throw e;
      }
    }
    return Real.load(i32, STATUS);
  }

  #waitIdle(th) {
    const i32 = th.control.i32;
    for (let spins = 0; Real.load(i32, STATUS) !== IDLE; spins++) {
      if (spins > 2000) {
        Real.wait(i32, STATUS, Real.load(i32, STATUS), 1000);
        const e = th.error();
        if (e !== null) throw e;
      }
    }
  }

  #grant(th, step, stale = 0) {
    const i32 = th.control.i32;
    i32[STEP] = step;
    i32[STALE] = stale;
    Real.store(i32, STATUS, RUNNING);
    Real.add(i32, GRANT, 1);
    Real.notify(i32, GRANT);
  }

  #request(th) {
    const c = th.control;
    const kind = c.i32[KIND];
    return { kind, buf: c.i32[BUF], byte: c.i32[BYTE], elem: c.i32[ELEM], a0: c.get(ARG0), a1: c.get(ARG1) };
  }

  /**
   * Runs `scenario` (its default export and its module URL) under `chooser`. Returns the
   * Execution, or throws ScheduleAborted when the run passed `maxSteps` (the threads are replaced).
   */
  async run(scenarioUrl, scenario, chooser, { maxSteps = 20_000, params = {} } = {}) {
    const n = scenario.threads.length;
    while (this.#threads.length < n) this.#threads.push(this.#spawn());
    const threads = this.#threads.slice(0, n);
    const lib = await libraryOf(this.#lib);
    const time = scenario.time;
    // The set-up runs here, on this thread's clock: it reads the scenario's start, as the explored
    // threads' set-up does, so that a run does not depend on how long the process has been up.
    const realNow = performance.now;
    performance.now = () => time.startMs;
    let setup;
    try {
      setup = scenario.setup(lib, params);
    } finally {
      performance.now = realNow;
    }
    const buffers = setup.buffers;
    const shadow = buffers.map((b) => new Uint8Array(b).slice());
    const trace = [];
    const pending = new Array(n).fill(null);
    const status = new Array(n).fill(RUNNING);
    let now = time.startMs;

    // Set-up: each thread in turn, every access granted, up to its ctx.ready() and then to its
    // first access after it.
    for (let t = 0; t < n; t++) {
      const th = threads[t];
      this.#waitIdle(th);
      th.port.postMessage({ scenario: scenarioUrl, thread: t, data: setup.data, buffers, lib: this.#lib });
      this.#grant(th, -1);
      for (let readySeen = false; ;) {
        status[t] = this.#waitStopped(th);
        if (status[t] !== AT_POINT) break;
        const req = this.#request(th);
        if (readySeen) { pending[t] = req; break; }
        if (req.kind === K.ready) readySeen = true;
        if (req.kind === K.clock) th.control.put(READING, time.startMs);
        // From ctx.ready() on, the thread may change nothing until its first point is granted.
        if (readySeen) syncShadow(buffers, shadow);
        this.#grant(th, -1);
      }
      const unseen = checkShadow(buffers, shadow, null);
      if (unseen !== null) throw new Error(`explorer: a write it did not see: ${unseen}`);
    }

    let last = -1;
    /** Per thread: the words it read since anything was last written, and how often it read one again unchanged. */
    const seen = Array.from({ length: n }, () => new Map());
    const repeats = new Array(n).fill(0);
    /** Per int32 word ('buf:byte'): its latest write after the set-up, and the value before it. */
    const writes = new Map();
    /** Per thread: the step of its latest Atomics operation. */
    const lastAtomic = new Array(n).fill(-1);
    let step = 0;
    for (;;) {
      const live = [];
      for (let t = 0; t < n; t++) if (status[t] === AT_POINT) live.push(t);
      if (live.length === 0) break;
      if (step >= maxSteps) {
        await this.#respawn(this.#threads.length);
        throw new ScheduleAborted(`no end after ${maxSteps} steps`);
      }
      // A thread that keeps reading the same words, unchanged, waits on another: while some
      // thread that is not waiting can move, switching away from it is free and it is not picked
      // (CHESS's yield).
      const busy = live.filter((t) => repeats[t] < SPIN_REPEATS);
      const enabled = busy.length > 0 ? busy : live;
      const lastEnabled = enabled.includes(last);
      const options = [];
      const order = lastEnabled ? [last, ...enabled.filter((t) => t !== last)] : enabled;
      for (const t of order) {
        const preempt = lastEnabled && t !== last ? 1 : 0;
        const req = pending[t];
        if (req.kind === K.clock) {
          time.moves.forEach((m, i) => options.push({ thread: t, move: i, preempt, timeMove: i === 0 ? 0 : 1, stale: 0 }));
        } else {
          options.push({ thread: t, move: -1, preempt, timeMove: 0, stale: 0 });
          const w = req.kind === K.read && req.elem === 0 ? writes.get(`${req.buf}:${req.byte}`) : undefined;
          if (w !== undefined && w.thread !== t && w.step > lastAtomic[t]) {
            options.push({ thread: t, move: -1, preempt, timeMove: 0, stale: 1, value: w.before });
          }
        }
      }
      let choice;
      try {
        choice = chooser.choose(options, step);
      } catch (e) {
        // A replayed schedule that does not fit this build (its step has fewer options): the
        // threads are stuck mid-call, so the next run gets new ones (else it waits for ever).
        await this.#respawn(this.#threads.length);
        throw e;
      }
      const pick = options[choice];
      const t = pick.thread;
      const th = threads[t];
      const req = pending[t];
      if (req.kind === K.clock) {
        now = time.moves[pick.move].to(now);
        th.control.put(READING, now);
      }
      if (pick.stale === 1) th.control.put(READING, pick.value);
      const before = req.elem === 0 && WRITES.has(req.kind) ? new Int32Array(buffers[req.buf], req.byte, 1)[0] : 0;
      this.#grant(th, step, pick.stale);
      status[t] = this.#waitStopped(th);
      const result = th.control.get(RESULT);
      const entry = {
        step, thread: t, kind: KINDS[req.kind], buf: req.buf, byte: req.byte, elem: req.elem < 0 ? 'clock' : ELEMS[req.elem],
        a0: req.a0, a1: req.a1, result, move: pick.move, stale: pick.stale === 1,
      };
      trace.push(entry);
      if (req.kind !== K.read && req.kind !== K.write && req.kind !== K.clock) lastAtomic[t] = step;
      if (req.elem === 0 && WRITES.has(req.kind) && req.buf >= 0 && req.buf < buffers.length) {
        const after = new Int32Array(buffers[req.buf], req.byte, 1)[0];
        if (after !== before) writes.set(`${req.buf}:${req.byte}`, { thread: t, step, before });
      }
      if (WRITES.has(req.kind) || req.kind === K.clock && pick.move > 0) {
        seen.forEach((m) => m.clear());
        repeats.fill(0);
      } else if (req.kind !== K.clock) {
        const word = `${req.buf}:${req.byte}`;
        const value = String(result);
        if (seen[t].get(word) === value) repeats[t]++;
        else seen[t].set(word, value);
      }
      const unseen = checkShadow(buffers, shadow, entry);
      if (unseen !== null) throw new Error(`explorer: a write it did not see: ${unseen}`);
      pending[t] = status[t] === AT_POINT ? this.#request(th) : null;
      last = t;
      step++;
    }

    const reports = threads.map((th, t) => {
      let m;
      while ((m = receiveMessageOnPort(th.port)) === undefined) {
        const e = th.error();
        if (e !== null) throw e;
      }
      Real.store(th.control.i32, STATUS, RUNNING); // take the report: the thread goes idle
      Real.notify(th.control.i32, STATUS);
      return { thread: t, status: status[t] === DONE ? 'done' : 'failed', ...m.message };
    });
    return { setup, trace, reports, steps: step, buffers, startMs: time.startMs };
  }
}

/** Copies every buffer into its shadow after the set-up (whose accesses are not checked). */
function syncShadow(buffers, shadow) {
  buffers.forEach((b, i) => {
    shadow[i] = new Uint8Array(b).slice();
  });
}

/**
 * Every byte that changed since the last step must belong to the one access of this step: a
 * write the explorer did not see (a view it does not know) fails the run.
 */
function checkShadow(buffers, shadow, entry) {
  for (let i = 0; i < buffers.length; i++) {
    const now = new Uint8Array(buffers[i]);
    // A growable buffer (a key heap) that grew: its new bytes were zero.
    if (shadow[i].length < now.length) {
      const grown = new Uint8Array(now.length);
      grown.set(shadow[i]);
      shadow[i] = grown;
    }
    const old = shadow[i];
    for (let b = 0; b < now.length; b++) {
      // Whole chunks that did not change are passed over at once (a step changes a few bytes).
      if ((b & (CHUNK - 1)) === 0 && Buffer.compare(now.subarray(b, b + CHUNK), old.subarray(b, b + CHUNK)) === 0) {
        b += CHUNK - 1;
        continue;
      }
      if (now[b] === old[b]) continue;
      const width = entry === null || entry.elem === 'clock' ? 0 : BYTES[entry.elem];
      if (!(entry !== null && entry.buf === i && b >= entry.byte && b < entry.byte + width)) {
        const where = entry === null ? 'before its first point' : `at step ${entry.step} (${entry.kind} of buffer ${entry.buf} byte ${entry.byte})`;
        return `buffer ${i} byte ${b} changed ${where}`;
      }
      old[b] = now[b];
    }
  }
  return null;
}

/** Bytes compared at once by checkShadow. */
const CHUNK = 1024;

const BYTES = {
  Int32: 4, BigInt64: 8, Float64: 8, Uint8: 1, Uint32: 4, Int8: 1, Int16: 2, Uint16: 2, Float32: 4, BigUint64: 8, Uint8Clamped: 1,
};
