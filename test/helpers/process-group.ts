// Child processes a test helper starts (redis-server nodes, a Sentinel) and the directory they
// use: killed and removed together by stop(), and killed anyway should the test process exit
// without it.
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';

export interface ProcessGroup {
  /** The processes to stop; push each as it is started. */
  readonly children: ChildProcess[];
  /**
   * Runs `before` (close the clients), then kills every child still running (SIGCONT first, for
   * one a test stopped with SIGSTOP), waits for each to exit, and removes the directory.
   */
  stop(before?: () => void): Promise<void>;
}

export function processGroup(dir: string): ProcessGroup {
  const children: ChildProcess[] = [];
  const killAll = () => { for (const c of children) c.kill('SIGKILL'); };
  process.once('exit', killAll);
  return {
    children,
    async stop(before) {
      process.removeListener('exit', killAll);
      before?.();
      await Promise.all(children.map((c) => {
        if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
        const gone = new Promise((r) => c.once('exit', r));
        c.kill('SIGCONT');
        c.kill('SIGKILL');
        return gone;
      }));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
