// The HTTP middleware's own cost per request: rateLimit() with the RateLimit fields on and off,
// against a bare tryAcquire on the same limiter, over node:http's own request and response
// classes (no socket traffic: what the middleware adds to a request, not the network).
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { perSecond, perMinute, RateLimiter, rateLimit } from 'sluice';
import { BATCH, fmt, makeKeys, nsPerCall } from './lib/measure.js';

/** The seven fields of draft 6 and the legacy ones, as names and typical values. */
const SEVEN = [
  'ratelimit-policy', '1000000000;w=1', 'ratelimit-limit', '1000000000', 'ratelimit-remaining', '999999999', 'ratelimit-reset', '1',
  'x-ratelimit-limit', '1000000000', 'x-ratelimit-remaining', '999999999', 'x-ratelimit-reset', '1765000000',
];

export async function runHttp({ quick = false } = {}) {
  const keys = makeKeys(1_000);
  const limiter = new RateLimiter({ limit: perSecond(1e9), maxKeys: 2_000 });
  const two = new RateLimiter({ limit: [perSecond(1e9), perMinute(6e10)], maxKeys: 2_000 });
  const req = new IncomingMessage(new Socket());
  const next = () => {};
  const keyOf = (r) => r.url;
  const handlers = {
    'tryAcquire alone (no middleware)': (r, _res, n) => { limiter.tryAcquire(r.url); n(); },
    'rateLimit, headers: false': rateLimit({ limiter, key: keyOf, headers: false, requestProperty: false }),
    'rateLimit, RateLimit fields on': rateLimit({ limiter, key: keyOf }),
    'rateLimit, fields on, two limits': rateLimit({ limiter: two, key: keyOf }),
    // Every option that adds work to an admitted request: seven fields (draft 6 and the legacy
    // ones), the degraded field's check, the three hooks and an allow list.
    'rateLimit, every field and hook': rateLimit({
      limiter, key: keyOf, headers: 'draft-6', legacyHeaders: true, degradedHeader: 'x-ratelimit-degraded', allowList: ['nobody'],
      onExceeded: () => {}, onExceeding: () => {}, onLimit: () => {},
    }),
    // The floor under the row above: tryAcquire, then the same seven fields set by hand with
    // constant values (node:http's setHeader, which any middleware pays), and nothing else.
    'tryAcquire + the seven fields by hand': (r, res, n) => {
      limiter.tryAcquire(r.url);
      for (let f = 0; f < SEVEN.length; f += 2) res.setHeader(SEVEN[f], SEVEN[f + 1]);
      n();
    },
  };
  let i = 0;
  const tasks = {};
  for (const [name, handler] of Object.entries(handlers)) {
    tasks[name] = () => {
      for (let b = 0; b < BATCH; b++) {
        req.url = keys[i++ % keys.length];
        // A fresh response for each request, as a server makes one: every variant pays for it
        // alike, and each sets its fields on an empty one.
        handler(req, new ServerResponse(req), next);
      }
    };
  }
  const r = await nsPerCall(tasks, quick ? { timeMs: 200, warmupMs: 50 } : {});
  const base = r['tryAcquire alone (no middleware)'].median;
  const lines = ['## HTTP: what the middleware adds to a request', ''];
  lines.push('`rateLimit()` called with node:http\'s own `IncomingMessage` and `ServerResponse` objects (no socket traffic), 1,000 keys of 24 characters in turn, ' +
    'limits nobody reaches; every request gets a fresh `ServerResponse`, in every variant alike (the base row pays for it too). ns per request, median (p25-p75) of ' +
    `tinybench samples of ${fmt(BATCH)} requests.`, '');
  lines.push('| variant | ns/request | p25-p75 | over tryAcquire alone |', '|---|---:|---:|---:|');
  for (const [name, x] of Object.entries(r)) {
    lines.push(`| ${name} | ${fmt(x.median, 1)} | ${fmt(x.p25, 1)}-${fmt(x.p75, 1)} | ${name === 'tryAcquire alone (no middleware)' ? '-' : `+${fmt(x.median - base, 1)}`} |`);
  }
  const floor = r['tryAcquire + the seven fields by hand'].median;
  lines.push('', `Of what every field and hook adds, node:http's setHeader of the seven fields (the row "by hand") is ${fmt((floor - base) / 1000, 2)} µs; ` +
    `the middleware's own work is the rest, ${fmt((r['rateLimit, every field and hook'].median - floor) / 1000, 2)} µs.`);
  lines.push('', '| target: what the middleware adds over tryAcquire alone | measured | met |', '|---|---:|---|');
  for (const [name, label] of [['rateLimit, RateLimit fields on', 'the RateLimit fields on'], ['rateLimit, every field and hook', 'every field and hook']]) {
    const over = r[name].median - base;
    lines.push(`| ${label}: at most 1 µs per request | ${fmt(over / 1000, 2)} µs | ${over <= 1000 ? 'yes' : '**missed**'} |`);
  }
  return { markdown: lines.join('\n') };
}
