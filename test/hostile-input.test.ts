import { gzipSync } from 'node:zlib';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven } from './helpers/ledger.js';

/**
 * Hostile input found by a probe of the landed service (issue 10, "Low"): NUL bytes and lone surrogates,
 * and bodies the JSON parser refuses for other reasons, were 500s. Each is a clear 400 now, and nothing
 * changes.
 */
let t: TestApp;
let pw: { id: string; apiKey: string };
beforeAll(async () => {
  t = await startTestApp();
  pw = await t.createPaywall();
});
afterAll(async () => {
  await t.close();
});

const raw = (body: string | Buffer, headers: Record<string, string>) =>
  fetch(`${t.url}/v1/user/balance/deposit`, {
    method: 'POST',
    headers: { authorization: `Bearer ${pw.apiKey}`, ...headers },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  }).then(async (r) => ({ status: r.status, body: await r.json() }));

describe('hostile input is a 400, never a 500', () => {
  it('a lone surrogate in a user id is refused; "a\\ufffd" stays a user of its own', async () => {
    const lone = await raw('{"user":"a\\ud800","amount":"1"}', { 'content-type': 'application/json' });
    expect(lone.status).toBe(400);
    expect(lone.body.error).toMatchObject({ type: 'invalid_request_error', param: 'user' });
    const replacement = await t.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: 'a\ufffd', amount: '1' },
    });
    expect(replacement.status).toBe(200);
    const viaHeader = await fetch(`${t.url}/v1/user/balance?user=${encodeURIComponent('a\ufffd')}`, {
      headers: { authorization: `Bearer ${pw.apiKey}` },
    }).then((r) => r.json());
    expect(viaHeader).toEqual({ balance: '1000000', balanceFormatted: '1.000000' });
  });

  it('NUL and lone surrogates in metadata are refused', async () => {
    for (const metadata of ['{"note":"a\\u0000b"}', '{"note":"\\udc00"}', '{"a\\u0000":1}']) {
      const r = await raw(`{"user":"meta","amount":"1","metadata":${metadata}}`, {
        'content-type': 'application/json',
      });
      expect({ metadata, status: r.status, param: r.body.error.param }).toEqual({
        metadata,
        status: 400,
        param: 'metadata',
      });
    }
  });

  it('an unsupported charset or content encoding, or a broken gzip body, is a 400 saying so', async () => {
    const charset = await raw('{"user":"c","amount":"1"}', {
      'content-type': 'application/json; charset=klingon',
    });
    expect(charset.status).toBe(400);
    expect(charset.body.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_charset' });
    const encoding = await raw('{"user":"c","amount":"1"}', {
      'content-type': 'application/json',
      'content-encoding': 'compress',
    });
    expect(encoding.status).toBe(400);
    expect(encoding.body.error).toMatchObject({ code: 'unsupported_encoding' });
    const broken = await raw(Buffer.from('not gzip at all'), {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });
    expect(broken.status).toBe(400);
    expect(broken.body.error.type).toBe('invalid_request_error');
    // A real gzip body works.
    const ok = await raw(gzipSync('{"user":"c","amount":"1"}'), {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });
    expect(ok).toEqual({ status: 200, body: { balance: '1000000', balanceFormatted: '1.000000' } });
    const users = await t.db.query(`select external_id from end_user where paywall_id = $1 order by 1`, [
      pw.id,
    ]);
    expect(users.map((u: any) => u.external_id)).toEqual(['a\ufffd', 'c']);
    await expectLedgerProven(t.db);
  });
});
