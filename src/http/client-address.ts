import { isIPv4, isIPv6 } from 'node:net';
import { describe, integerInRange } from '../config/check.js';

/**
 * The key a client's address gives: an IPv4 address as it is, an IPv6 address grouped by its
 * first `prefixBits` bits (one subscriber usually holds a whole /64, and can pick a new address
 * in it for every request), an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, what a dual-stack
 * server sees for IPv4 clients) as the IPv4 address.
 *
 *   clientKey('2001:db8:1:2:a:b:c:d', 64) === '2001:db8:1:2::/64'
 *
 * `prefixBits` 128 keys the address alone, in its RFC 5952 text (lower case, zeros compressed,
 * no zone: `2001:DB8:0:0:0:0:0:1` is `2001:db8::1`); an address that is not IP is kept as it is.
 * Pure; any thread.
 */
export function clientKey(address: string, prefixBits: number): string {
  if (isIPv4(address)) return address;
  const zone = address.indexOf('%');
  const bare = zone < 0 ? address : address.slice(0, zone); // a link-local zone names an interface, not a client
  if (!isIPv6(bare)) return address;
  const groups = ipv6Groups(bare);
  if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff) {
    return `${groups[6] >> 8}.${groups[6] & 0xff}.${groups[7] >> 8}.${groups[7] & 0xff}`;
  }
  // One address, one key: /128 is the address in RFC 5952 text (2001:DB8:0:0:0:0:0:1 is
  // 2001:db8::1), without a zone, as the shorter prefixes are.
  if (prefixBits >= 128) return compress(groups);
  // Keep the first prefixBits bits; the rest are zero.
  const kept: number[] = [];
  for (let i = 0; i < 8; i++) {
    const bits = Math.max(0, Math.min(16, prefixBits - i * 16));
    kept.push(bits === 0 ? 0 : (groups[i] as number) & ((0xffff << (16 - bits)) & 0xffff));
  }
  return `${compress(kept)}/${prefixBits}`;
}

/**
 * The key a custom `key` function should give for a client's address, as the default key does:
 * IPv4 as it is, IPv4-mapped IPv6 as the IPv4 address, other IPv6 grouped by its first
 * `ipv6Subnet` bits (default 64: one subscriber's whole /64 is one client). A `key: (req) =>
 * req.ip` alone gives every address of a /64 a limit of its own.
 *
 *   rateLimit({ limiter, key: (req) => `${req.headers['x-tenant']}:${ipKey(req.ip)}` })
 *
 * An address that is not IP comes back as it is. Throws `TypeError` for an `ip` that is not a
 * string and `RangeError` for an `ipv6Subnet` that is not an integer from 1 to 128. Pure; any
 * thread.
 */
export function ipKey(ip: string, ipv6Subnet = 64): string {
  if (typeof ip !== 'string') throw new TypeError(`ip must be a string (an IPv4 or IPv6 address), got ${describe(ip)}`);
  integerInRange('ipv6Subnet', ipv6Subnet, 1, 128);
  return clientKey(ip, ipv6Subnet);
}

/** The eight 16-bit groups of a valid IPv6 address (with `::` and an IPv4 tail expanded). */
function ipv6Groups(address: string): [number, number, number, number, number, number, number, number] {
  let text = address.toLowerCase();
  // An embedded IPv4 tail (::ffff:192.0.2.1, 64:ff9b::192.0.2.1) as two groups.
  const dot = text.lastIndexOf('.');
  if (dot >= 0) {
    const colon = text.lastIndexOf(':');
    const [a, b, c, d] = text.slice(colon + 1).split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, colon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, null];
  const left = head === '' ? [] : head.split(':');
  const right = tail === null || tail === '' ? [] : tail.split(':');
  const zeros = tail === null ? [] : Array.from({ length: 8 - left.length - right.length }, () => '0');
  return [...left, ...zeros, ...right].map((g) => parseInt(g, 16)) as [number, number, number, number, number, number, number, number];
}

/** RFC 5952 text of eight groups: lower-case hex, the longest run of two or more zero groups as `::`. */
function compress(groups: readonly number[]): string {
  let bestAt = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestAt = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestAt < 0) return hex.join(':');
  return `${hex.slice(0, bestAt).join(':')}::${hex.slice(bestAt + bestLength).join(':')}`;
}
