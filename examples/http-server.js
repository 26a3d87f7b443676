// A node:http server that lets each client address make 3 requests per minute. Every response
// carries the RateLimit-Policy and RateLimit fields; the fourth request within 20 seconds gets
// 429 Too Many Requests with Retry-After. Express takes the same middleware: app.use(limit).
import { createServer } from 'node:http';
import { perMinute, RateLimiter, rateLimit } from 'sluice';

const limiter = new RateLimiter({ limit: perMinute(3), maxKeys: 10_000 });
const limit = rateLimit({ limiter }); // key: the client's address (req.socket.remoteAddress here)

const server = createServer((req, res) => {
  limit(req, res, (error) => {
    if (error) {
      res.statusCode = 500;
      res.end();
      return;
    }
    res.setHeader('content-type', 'text/plain; charset=utf-8');
    res.end('hello\n');
  });
});

server.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address()); // TCP: never a pipe's name
  console.log(`listening on http://127.0.0.1:${port}`);
});
