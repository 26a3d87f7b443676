import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Decision } from '../rate/types.js';
import { asError } from './http-inputs.js';
import { giveBackAfter, type GiveBackWhen } from './give-back.js';
import { stacked } from './header-modes.js';
import { DENIED_BODY, DENIED_STATUS, makeCheck, settleCheck, SKIPPED, type Outcome, type RateLimitOptions } from './middleware.js';

/**
 * Fastify's bare `onRequest` hook (`fastifyRateLimit`) and what the plugin (fastify.ts) shares
 * with it: the reply's fields, the client address, and the give-back listeners on the reply's
 * node:http response. Written against Fastify's documented hook and reply; it does not import
 * Fastify.
 *
 * Thread-safety: a hook belongs to the thread of its limiter instance.
 */

/** The parts of a Fastify request the hook reads (`ip`; `raw` is the node:http request). Used on one thread. */
export interface FastifyRequestLike {
  ip?: string;
  raw?: IncomingMessage;
}

/** The parts of a Fastify reply the hook uses, as documented for Fastify's Reply. Used on one thread. */
export interface FastifyReplyLike {
  code(statusCode: number): unknown;
  header(name: string, value: string): unknown;
  /** Fastify's reply.getHeader: a field set earlier (another limiter's), to add to. */
  getHeader?(name: string): unknown;
  /** The node:http response (for skipSuccessfulRequests and skipFailedRequests). */
  raw?: ServerResponse;
  send(payload?: string): unknown;
}

/** A Fastify `onRequest` hook in callback style; it belongs to its limiter's thread. */
export type FastifyOnRequestHook<Req = FastifyRequestLike, Reply = FastifyReplyLike> =
  (request: Req, reply: Reply, done: (error?: Error) => void) => void;

/**
 * Sets a check's fields on a Fastify reply: the RateLimit fields after any an earlier limiter set,
 * and Retry-After on a refusal that can pass later. For the bare hook and the plugin alike.
 */
export function setReplyFields(reply: FastifyReplyLike, outcome: Outcome, stacking: number): void {
  const fields = outcome.fields;
  if (fields !== null) {
    for (let i = 0; i < fields.length; i += 2) {
      const name = fields[i] as string;
      reply.header(name, i < 2 * stacking ? stacked(reply.getHeader?.(name), fields[i + 1] as string) : fields[i + 1] as string);
    }
  }
  if (outcome.retryAfter !== undefined) reply.header('retry-after', outcome.retryAfter);
}

/** For an admitted request whose spend may come back: the listeners on the Fastify reply's node:http response. */
export function giveBackOnReply(reply: FastifyReplyLike, outcome: Outcome, when: GiveBackWhen | null): void {
  if (outcome.giveBack === undefined || when === null) return;
  if (reply.raw === undefined) throw new TypeError('skipSuccessfulRequests and skipFailedRequests need the reply\'s node:http response (reply.raw)');
  giveBackAfter(reply.raw, outcome.giveBack, when);
}

/** The Fastify client address: `request.ip` (which follows Fastify's trustProxy), else the socket's. */
export function fastifyAddress(request: FastifyRequestLike): unknown {
  return request.ip ?? request.raw?.socket?.remoteAddress;
}

/**
 * A Fastify `onRequest` hook, callback style: `fastify.addHook('onRequest', fastifyRateLimit({
 * limiter }))`. The same check as `rateLimit`, with `key` a function of the Fastify request
 * (default: `request.ip`). Allowed: sets the RateLimit fields with `reply.header` and calls
 * `done()`. Refused: `reply.code(429)`, the fields and `Retry-After`, and `reply.send(body)`
 * without calling `done`, as Fastify's hook documentation asks. An error goes to `done(error)`.
 * Written against Fastify's documented hook signature; it does not import Fastify.
 *
 * Thread-safety: the hook belongs to the thread of its limiter instance.
 */
export function fastifyRateLimit<Req extends FastifyRequestLike = FastifyRequestLike, Reply extends FastifyReplyLike = FastifyReplyLike>(
  options: RateLimitOptions<Req>,
): FastifyOnRequestHook<Req, Reply> {
  const { check, status, body, stacking, giveBackWhen } = makeCheck<Req>(options, fastifyAddress, 'fastifyRateLimit');
  const answer = (request: Req, reply: Reply, done: (error?: Error) => void, outcome: Outcome): void => {
    if (outcome.thrown !== undefined) {
      // A hook threw after an admission whose spend may come back: the reply the error gets
      // decides the give-back, as any other's.
      giveBackOnReply(reply, outcome, giveBackWhen);
      done(asError(outcome.thrown.error));
      return;
    }
    (request as unknown as { rateLimit: Decision }).rateLimit = outcome.decision;
    setReplyFields(reply, outcome, stacking);
    if (outcome.allowed) {
      giveBackOnReply(reply, outcome, giveBackWhen);
      done();
      return;
    }
    if (outcome.denied === true) {
      reply.code(DENIED_STATUS);
      reply.header('content-type', 'text/plain; charset=utf-8');
      reply.send(DENIED_BODY);
      return;
    }
    settleCheck(() => body(request, outcome.decision), (b) => {
      reply.code(status);
      reply.header('content-type', b.type);
      reply.send(b.text);
    }, (e) => done(asError(e)));
  };
  return (request, reply, done) => {
    settleCheck(() => check(request), (o) => (o === SKIPPED ? done() : answer(request, reply, done, o)), (e) => done(asError(e)));
  };
}
