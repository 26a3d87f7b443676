// GCRA at width 32 on the one-limit path (Gcra32), on a key that holds one admission already: one
// thread checks it twice (its second check starts from its own last write), the other once (from a
// load). Checked: the admissions and refusals against the exact model, with the set-up's admission.
import { gcraModel } from '../models.mjs';
import { gcraOutcome, liveCopies, tableNames } from './common.mjs';
import { gcra32Limit, gcra32Setup, gcra32Time } from './_gcra32.mjs';

const limit = gcra32Limit;

export default {
  name: 'gcra-32-decide',
  what: 'Gcra32 decide: the own-write path, the load loop, lastSec across a second edge, a wrap, a step back',
  time: gcra32Time,
  setup: gcra32Setup,
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('allow', () => rl.allow('k')); // set-up: the key exists and holds one admission
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    return liveCopies(exec.buffers[0], lib, ['k']) ?? gcraOutcome(exec, gcraModel(limit, { refusalSlackMs: 1e-5 }));
  },
};
