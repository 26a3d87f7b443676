// The machine facts the suites quote.
import nodeOs from 'node:os';

export const os = { cores: nodeOs.cpus().length };
