import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Request } from 'express';
import { readMultipart } from '../rest-compat/media.routes.js';

/**
 * An upload its client abandons (docs/proxy.md "Uploads"): the reading of the body ends with the client.
 * Before, busboy waited for an end that never came, so the request's handler never finished (no log line,
 * no metric, the parts read so far held until the socket's objects were collected).
 */
let server: Server;
let settled: Promise<string>;
let settle: (v: string) => void;
beforeAll(async () => {
  server = createServer((req: IncomingMessage) => {
    readMultipart(req as Request, { fileBytes: 1024 * 1024, files: 1, totalBytes: 2 * 1024 * 1024 }).then(
      () => settle('resolved'),
      (e: Error) => settle(`rejected: ${e.message}`),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

it('a client that goes away inside a file ends the read: rejected at once', async () => {
  settled = new Promise((r) => (settle = r));
  const boundary = 'b0undary';
  const head = `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="a.wav"\r\ncontent-type: audio/wav\r\n\r\n`;
  const req = request({
    port: (server.address() as AddressInfo).port,
    method: 'POST',
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': '500000' },
  });
  req.on('error', () => undefined);
  req.write(head);
  req.write(Buffer.alloc(100_000, 1));
  await new Promise((r) => setTimeout(r, 100));
  req.destroy();
  const outcome = await Promise.race([
    settled,
    new Promise<string>((r) => setTimeout(() => r('still waiting after 3 s'), 3000)),
  ]);
  expect(outcome).toBe('rejected: the upload was cut off before its end');
});
