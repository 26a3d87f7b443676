// The ports the Redis test helpers pick (test/helpers/redis-cluster.ts, PORT_RANGES): a cluster
// node's bus port once fell in Linux's ephemeral range, where an outgoing connection of another
// test took it between the helper's probe and the node's bind, and a busy run of the whole suite
// failed with "Address already in use". Every port the helpers draw, and every bus port, must lie
// below that range, and the ranges apart.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BUS_OFFSET, drawPort, PORT_RANGES } from '../helpers/redis-cluster.js';

/** The first ephemeral port: this host's, or Linux's default where /proc does not say. */
function ephemeralStart(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  } catch {
    return 32_768;
  }
}

describe('the Redis test helpers\' ports', () => {
  it('lie below the ephemeral range, bus ports included, and the ranges do not meet', () => {
    const limit = Math.min(ephemeralStart(), 32_768);
    const { cluster, sentinel } = PORT_RANGES;
    const spans = [[cluster.from, cluster.to], [cluster.from + BUS_OFFSET, cluster.to + BUS_OFFSET], [sentinel.from, sentinel.to]];
    for (const [from, to] of spans) {
      expect(from).toBeGreaterThanOrEqual(1_024);
      expect(to).toBeLessThanOrEqual(limit);
    }
    for (let i = 0; i < spans.length; i++) {
      for (let j = i + 1; j < spans.length; j++) {
        const [a, b] = [spans[i] as number[], spans[j] as number[]];
        expect((a[1] as number) <= (b[0] as number) || (b[1] as number) <= (a[0] as number)).toBe(true);
      }
    }
    for (let i = 0; i < 1_000; i++) {
      const port = drawPort(cluster);
      expect(port).toBeGreaterThanOrEqual(cluster.from);
      expect(port + BUS_OFFSET).toBeLessThan(limit);
      const s = drawPort(sentinel);
      expect(s >= sentinel.from && s < sentinel.to).toBe(true);
    }
  });
});
