// The part of autocannon's API the HTTP tests use (the package ships no types of its own).
declare module 'autocannon' {
  interface Options {
    url: string;
    connections?: number;
    amount?: number;
    duration?: number;
    headers?: Record<string, string>;
  }
  interface Result {
    '2xx': number;
    non2xx: number;
    errors: number;
    timeouts: number;
    statusCodeStats: Record<string, { count: number }>;
  }
  export default function autocannon(options: Options): Promise<Result>;
}
