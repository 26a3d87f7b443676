/**
 * `npm start`: `sluice demo` with its defaults (see `cli/demo.ts`): four worker threads share one
 * limiter across three tenants, then a summary checks every tenant against what GCRA permits.
 *
 * Thread-safety: main thread only; the demo starts its own workers.
 */
import { runDemo } from './cli/demo.js';

process.exitCode = await runDemo([]);
