import type { Clock } from '../time/clock.js';

/**
 * What a limiter class's `attach` passes to its own constructor. Not exported from the package,
 * so users cannot forge one: a constructor that receives an instance knows it came from `attach`.
 *
 * Thread-safety: plain data, made and used on one thread.
 */
export class AttachRequest<Handle> {
  constructor(
    readonly handle: Handle,
    readonly clock: Clock | undefined,
    readonly cacheSize: number | undefined,
  ) {}
}
