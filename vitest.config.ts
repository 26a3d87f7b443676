import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Property tests repeat: one fixed fast-check seed unless FC_SEED says otherwise.
    setupFiles: ['test/setup/fast-check.ts'],
    // Two test files at a time, on 2 cores as on more: the tests that count on contention or
    // timing keep trying until they see it, so a busy core never fails one.
    maxWorkers: 2,
    // Test files share their worker process and its loaded modules, one file after another, so
    // that each process loads vitest, the library and TypeScript's helpers once rather than once
    // per file. Every file still starts its own limiters, workers and servers, and stops them.
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
