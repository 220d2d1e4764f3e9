import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import { killAllServices, startService, type ServiceProcess } from './helpers/service.js';

/**
 * Hostile clients at the network edge against the real service process, with its default limits
 * (docs/operations.md "The network edge"): 1,200 slow sockets from one address (MAX_CONNECTIONS_PER_IP,
 * HTTP_HEADERS_TIMEOUT_MS), and 1,200 unauthenticated 1 MiB uploads spread over several addresses (the
 * API key is checked before a body is read). The service's resident memory is sampled throughout.
 */

let pp: PrivatePostgres;
let service: ServiceProcess;

beforeAll(async () => {
  pp = await startPrivatePostgres();
  service = await startService(await pp.createDatabase('edge'));
}, 120_000);

afterAll(async () => {
  await service?.stop();
  killAllServices();
  pp?.destroy();
});

/** The service's resident set size in MiB (Linux /proc). */
function rssMiB(): number {
  const status = readFileSync(`/proc/${service.proc.pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) / 1024;
}

/** Samples the RSS every 50 ms until stopped; returns the peak. */
function sampleRss(): { stop(): number } {
  let peak = rssMiB();
  const timer = setInterval(() => (peak = Math.max(peak, rssMiB())), 50);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, rssMiB());
    },
  };
}

/** A raw connection from `localAddress`; resolves with the status line it got (or '' when cut). */
function slowSocket(localAddress: string, first: string, then?: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const socket: Socket = connect({ port: service.port, host: '127.0.0.1', localAddress }, () => {
      socket.write(first);
      if (then) socket.write(then);
    });
    let got = '';
    socket.setEncoding('latin1').on('data', (d: string) => (got += d));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(got.split('\r\n')[0]));
  });
}

const count = (lines: string[]) =>
  lines.reduce<Record<string, number>>((acc, l) => ((acc[l || 'cut'] = (acc[l || 'cut'] ?? 0) + 1), acc), {});

test('1,200 slow sockets from one address: 256 held (then 408 after the header timeout), 944 refused with 429; memory stays bounded', async () => {
  const before = rssMiB();
  const rss = sampleRss();
  const answers = await Promise.all(
    Array.from({ length: 1200 }, () =>
      slowSocket('127.0.0.3', 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: app'),
    ),
  );
  const peak = rss.stop();
  expect(count(answers)).toEqual({
    'HTTP/1.1 429 Too Many Requests': 944,
    'HTTP/1.1 408 Request Timeout': 256,
  });
  console.log(`slow headers: RSS ${before.toFixed(0)} MiB before, ${peak.toFixed(0)} MiB at the peak`);
  expect(peak - before).toBeLessThan(128);
  // Served as before.
  expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
}, 120_000);

test('1,200 unauthenticated 1 MiB uploads over five addresses: every one gets 401 before its body is read; memory stays bounded', async () => {
  const before = rssMiB();
  const rss = sampleRss();
  const body = Buffer.alloc(1024 * 1024 - 1, 'x');
  const answers = await Promise.all(
    Array.from({ length: 1200 }, (_, i) =>
      slowSocket(
        `127.0.0.${10 + (i % 5)}`,
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024}\r\n\r\n`,
        body,
      ),
    ),
  );
  const peak = rss.stop();
  expect(count(answers)).toEqual({ 'HTTP/1.1 401 Unauthorized': 1200 });
  console.log(`1 MiB uploads: RSS ${before.toFixed(0)} MiB before, ${peak.toFixed(0)} MiB at the peak`);
  expect(peak - before).toBeLessThan(256);
  expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
}, 180_000);
