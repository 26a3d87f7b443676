// One explored thread. It instruments itself (instrument.mjs), then runs, run after run, the body
// of one thread of a scenario, stopping at every shared access and clock reading until the
// controller (controller.mjs) lets it go on.
//
// A run: the controller posts { scenario, thread, data, buffers } on the port and moves the
// grant word; the body attaches (every access a point, granted in a fixed order), reaches
// `ctx.ready()`, and from then on runs as the schedule says. What it returns, with the calls it
// made (each call's clock readings and the steps of its first and last access), goes back on
// the port before the thread reports DONE.
import { receiveMessageOnPort, workerData } from 'node:worker_threads';
import {
  ARG0, ARG1, AT_POINT, BUF, BYTE, Control, DONE, ELEM, ELEMS, FAILED, GRANT, IDLE, K, KIND, READING, Real, RESULT,
  STALE, STATUS, STEP,
} from './wire.mjs';
import { instrument, nameBuffers } from './instrument.mjs';
import { libraryOf } from './lib.mjs';

const control = new Control(workerData.control);
const port = workerData.port;
const i32 = control.i32;

/** The call under way in this run, if any: it collects its readings and steps. */
let call = null;
let lastStep = -1;
let inRun = false;

function point(kind, buf, byte, elem, a0, a1) {
  if (!inRun) throw new Error('explorer: a shared access outside a run');
  i32[KIND] = kind;
  i32[BUF] = buf;
  i32[BYTE] = byte;
  i32[ELEM] = elem === 'clock' ? -1 : ELEMS.indexOf(elem);
  control.put(ARG0, a0);
  control.put(ARG1, a1);
  const seq = Real.load(i32, GRANT);
  // Real Atomics on the control words: the controller reads the request after this store.
  Real.store(i32, STATUS, AT_POINT);
  Real.notify(i32, STATUS);
  control.waitWhile(GRANT, seq);
  lastStep = i32[STEP];
  if (call !== null) {
    if (call.firstStep < 0) call.firstStep = lastStep;
    call.lastStep = lastStep;
  }
  if (kind === K.clock) {
    const reading = control.get(READING);
    call?.readings.push(reading);
    control.put(RESULT, reading);
    return reading;
  }
  return kind === K.read && i32[STALE] === 1 ? control.get(READING) : undefined;
}

instrument(point, (value) => {
  control.put(RESULT, value);
  return value;
});

const ctx = {
  /** Ends the thread's set-up: from here on, the schedule decides. */
  ready() {
    point(K.ready, -1, 0, 'clock');
  },
  /** Runs `f` as one call of the scenario, recording its readings, first and last steps. */
  call(label, f) {
    if (call !== null) throw new Error('explorer: calls do not nest');
    call = { label, readings: [], firstStep: -1, lastStep: -1, result: undefined, error: null };
    try {
      call.result = f();
    } catch (e) {
      call.error = String(e?.stack ?? e);
    }
    const done = call;
    call = null;
    calls.push(done);
    return done.result;
  },
};
let calls = [];

const loaded = new Map();
async function load(url) {
  let m = loaded.get(url);
  if (m === undefined) loaded.set(url, (m = await import(url)));
  return m;
}

for (;;) {
  const seq = Real.load(i32, GRANT);
  Real.store(i32, STATUS, IDLE);
  Real.notify(i32, STATUS);
  control.waitWhile(GRANT, seq);
  let message;
  while ((message = receiveMessageOnPort(port)) === undefined);
  const { scenario, thread, data, buffers, lib: libUrl } = message.message;
  if (scenario === null) break;
  const mod = await load(scenario);
  const lib = await libraryOf(libUrl);
  calls = [];
  nameBuffers(buffers);
  inRun = true;
  let value = null;
  let failure = null;
  try {
    value = mod.default.threads[thread](ctx, data, lib);
  } catch (e) {
    failure = String(e?.stack ?? e);
  }
  inRun = false;
  port.postMessage({ value, calls, failure });
  Real.store(i32, STATUS, failure === null ? DONE : FAILED);
  Real.notify(i32, STATUS);
  // Wait for the controller to take the report before going idle again.
  control.waitWhile(STATUS, failure === null ? DONE : FAILED);
}
