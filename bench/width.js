// Integer width for the per-key state word: what one read-modify-CAS costs with each option.
// The product uses the first (int32); this suite is why.
import { BATCH, bytesPerCall, fmt, nsPerCall } from './lib/measure.js';

const sab = new SharedArrayBuffer(1 << 16);
const i32 = new Int32Array(sab);
const b64 = new BigInt64Array(sab);
let j = 0;

/** int32 TAT: load, add an interval, CAS. No allocation. */
function int32Step() {
  const k = (j++ & 511) * 2;
  const w = Atomics.load(i32, k);
  Atomics.compareExchange(i32, k, w, (w + 7) | 0);
}

/** 64-bit word [tat:48 | generation:16] handled as BigInt. */
function bigintStep() {
  const k = j++ & 511;
  const w = Atomics.load(b64, k);
  const tat = Number(w >> 16n);
  const gen = w & 0xffffn;
  Atomics.compareExchange(b64, k, w, (BigInt(tat + 7) << 16n) | gen);
}

/** 64-bit word read as two int32 halves (no BigInt on the read), BigInt only for the CAS. */
function halvesStep() {
  const k = j++ & 511;
  const lo = Atomics.load(i32, 2 * k) >>> 0;
  const hi = Atomics.load(i32, 2 * k + 1);
  const v = hi * 2 ** 32 + lo;
  Atomics.compareExchange(b64, k, BigInt(v), BigInt(v + 7));
}

export async function runWidth({ quick = false } = {}) {
  const batch = (fn) => () => { for (let i = 0; i < BATCH; i++) fn(); };
  const res = await nsPerCall({
    'Int32Array: load + compareExchange': batch(int32Step),
    'BigInt64Array: load + BigInt math + compareExchange': batch(bigintStep),
    'BigInt64Array CAS, read as two int32 halves': batch(halvesStep),
  }, quick ? { timeMs: 200, warmupMs: 50 } : {});
  const bytes = {
    'Int32Array: load + compareExchange': await bytesPerCall(int32Step),
    'BigInt64Array: load + BigInt math + compareExchange': await bytesPerCall(bigintStep),
    'BigInt64Array CAS, read as two int32 halves': await bytesPerCall(halvesStep),
  };
  const base = res['Int32Array: load + compareExchange'].median;
  const lines = ['## Integer width of the state word', '', 'One uncontended read-modify-compare-and-swap, single thread.', ''];
  lines.push('| state word | ns/op median | p25-p75 | bytes/op | vs int32 |', '|---|---:|---:|---:|---:|');
  for (const [name, r] of Object.entries(res)) {
    lines.push(`| ${name} | ${fmt(r.median, 1)} | ${fmt(r.p25, 1)}-${fmt(r.p75, 1)} | ${fmt(bytes[name], 1)} | ${fmt(r.median / base, 2)}x |`);
  }
  return { markdown: lines.join('\n'), figures: { res, bytes } };
}
