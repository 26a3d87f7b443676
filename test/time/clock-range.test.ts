import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';

const MAX_MS = 2 ** 53;

describe('ManualClock range', () => {
  it('holds readings far past 9.2e12 ms exactly, up to 2**53', () => {
    expect(new ManualClock(1e13).now()).toBe(1e13);
    expect(new ManualClock(1e15).now()).toBe(1e15);
    expect(new ManualClock(MAX_MS).now()).toBe(MAX_MS);
    expect(new ManualClock(MAX_MS - 1).now()).toBe(MAX_MS - 1);
    const clock = new ManualClock();
    clock.set(MAX_MS);
    expect(clock.now()).toBe(MAX_MS);
  });

  it('returns fractional readings exactly as given', () => {
    for (const ms of [1234.567, 0.1, 1 / 3, Number.MIN_VALUE, 2 ** 40 + 0.5, 2 ** 52 - 0.5]) {
      expect(new ManualClock(ms).now()).toBe(ms);
      const clock = new ManualClock();
      clock.set(ms);
      expect(clock.now()).toBe(ms);
    }
    const clock = new ManualClock(1000);
    clock.advance(234.567);
    expect(clock.now()).toBe(1000 + 234.567);
  });

  it('advances exactly across 2**40 and up to 2**53 in integer steps', () => {
    const clock = new ManualClock(2 ** 40 - 3);
    clock.advance(5);
    expect(clock.now()).toBe(2 ** 40 + 2);
    clock.advance(2 ** 52 - 7);
    expect(clock.now()).toBe(2 ** 40 + 2 ** 52 - 5);
    clock.set(MAX_MS - 10);
    for (let i = 0; i < 10; i++) clock.advance(1);
    expect(clock.now()).toBe(MAX_MS);
    clock.advance(0);
    expect(clock.now()).toBe(MAX_MS);
  });

  it.each([
    [1e16, /^startMs must be a finite number from 0 to 2\*\*53, got 10000000000000000$/],
    [MAX_MS + 2, /^startMs must be a finite number from 0 to 2\*\*53, got 9007199254740994$/],
    [Infinity, /^startMs must be a finite number >= 0, got Infinity$/],
    [NaN, /^startMs must be a finite number >= 0, got NaN$/],
    [-1, /^startMs must be a finite number >= 0, got -1$/],
  ])('refuses new ManualClock(%s) with a RangeError naming startMs and the value', (startMs, message) => {
    expect(() => new ManualClock(startMs)).toThrow(RangeError);
    expect(() => new ManualClock(startMs)).toThrow(message);
  });

  it('refuses set and advance past 2**53 with a RangeError naming ms and the value, changing nothing', () => {
    const clock = new ManualClock(MAX_MS - 4);
    expect(() => clock.set(MAX_MS + 2)).toThrow(RangeError);
    expect(() => clock.set(MAX_MS + 2)).toThrow(/^ms must be a finite number from 0 to 2\*\*53, got 9007199254740994$/);
    expect(() => clock.set(-Infinity)).toThrow(/^ms must be a finite number >= 0, got -Infinity$/);
    expect(() => clock.advance(5)).toThrow(RangeError);
    expect(() => clock.advance(5)).toThrow(/^ms must be at most 4 \(the clock must stay within 2\*\*53 ms\), got 5$/);
    expect(() => clock.advance(1e300)).toThrow(/^ms must be at most 4 .*got 1e\+300$/);
    expect(() => clock.advance(NaN)).toThrow(/^ms must be a finite number >= 0, got NaN$/);
    expect(() => clock.advance(-1)).toThrow(/^ms must be a finite number >= 0, got -1$/);
    expect(clock.now()).toBe(MAX_MS - 4);
    clock.advance(4);
    expect(clock.now()).toBe(MAX_MS);
  });

  it('shares one reading between instances over the same buffer', () => {
    const clock = new ManualClock(1e13 + 0.25);
    const attached = new ManualClock(clock.buffer);
    expect(attached.now()).toBe(1e13 + 0.25);
    attached.advance(2 ** 40);
    expect(clock.now()).toBe(1e13 + 0.25 + 2 ** 40);
    clock.set(2 ** 50);
    expect(attached.now()).toBe(2 ** 50);
    expect(() => attached.set(2 ** 49)).toThrow(/^ms must not be earlier than the clock's time \(1125899906842624\), got 562949953421312$/);
  });

  it('normalises -0 to 0', () => {
    expect(Object.is(new ManualClock(-0).now(), 0)).toBe(true);
  });

  it('wakes a waiter when a large reading is reached', async () => {
    const clock = new ManualClock(1e13);
    expect(clock.now()).toBe(1e13); // a wrapped reading would leave the waiter below waiting forever
    let done = false;
    const waiting = clock.waitUntil(1e13 + 2 ** 41).then(() => { done = true; });
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    clock.advance(2 ** 41);
    await waiting;
    expect(done).toBe(true);
    expect(clock.waitUntilSync(1e13 + 2 ** 41, 0)).toBe(true);
    expect(clock.waitUntilSync(MAX_MS, 0)).toBe(false);
  });
});
