import { startTestApp, type TestApp } from './helpers/app.js';
import { PageClient } from './helpers/page-client.js';
import { usdcText } from '../src/shared/money.js';
import { renderDocument } from '../src/pages/html.js';
import { DefaultTopupPage } from '../src/pages/topup.page.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

describe('hosted pages behind the links the API hands out', () => {
  it('the DEFAULT-mode top-up link opens a page naming the app, with HTML escaped', async () => {
    const pw = await t.createPaywall('DEFAULT', 'Acme <b>AI</b>');
    const link = await t.rest('GET', '/v1/user/balance/topup?user=alice', { token: pw.apiKey });
    expect(link.status).toBe(200);
    expect(link.body.url).toBe(`${t.url}/topup/${pw.id}?user=alice`);
    const res = await fetch(link.body.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    const html = await res.text();
    expect(html).toContain('Acme &lt;b&gt;AI&lt;/b&gt;');
    expect(html).not.toContain('<b>AI</b>');
    // The tab icon is inline: no request for /favicon.ico (a 404 in every browser console).
    expect(html).toMatch(/<link rel="icon" href="data:image\/svg\+xml,/);
  });

  it("a SHARED app's top-up page is the hosted wallet's: /topup/{id} answers 303 to /wallet/topup", async () => {
    const pw = await t.createPaywall('SHARED', 'Shared shop');
    const res = await fetch(`${t.url}/topup/${pw.id}?user=bob`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/wallet/topup');
  });

  it('the SHARED-mode connect link leads to the wallet sign-in; unknown or archived paywalls are 404', async () => {
    const pw = await t.createPaywall('SHARED', 'Shared app');
    const connect = await t.rest('GET', '/v1/user/connect?user=bob', { token: pw.apiKey });
    expect(connect.body.connected).toBe(false);
    const res = await fetch(connect.body.url, { redirect: 'manual' });
    expect(res.status).toBe(303);
    const u = new URL(connect.body.url);
    expect(res.headers.get('location')).toBe(
      `/wallet/sign-in?next=${encodeURIComponent(u.pathname + u.search)}`,
    );
    const signIn = await fetch(connect.body.url);
    expect(signIn.status).toBe(200);
    expect(await signIn.text()).toContain('<button type="submit">Send code</button>');
    expect((await fetch(`${t.url}/topup/00000000-0000-0000-0000-000000000000?user=x`)).status).toBe(404);
    expect((await fetch(`${t.url}/topup/not-a-uuid`)).status).toBe(404);
    await t.gql(pw.apiKey, `mutation { archivePaywall { id } }`);
    expect((await fetch(connect.body.url)).status).toBe(404);
  });
});

describe('money as people read it: one rule on every hosted page and e-mail (docs/wallet.md)', () => {
  it('usdcText: two decimals, more only when the amount has them, grouped thousands, a true minus', () => {
    expect(
      [
        12_500_000n,
        5_000_000n,
        0n,
        109n,
        50n,
        2_620n,
        1_250_000_000n,
        1_234_567_890_000n,
        -300_000n,
        -50n,
      ].map(usdcText),
    ).toEqual([
      '12.50 USDC',
      '5.00 USDC',
      '0.00 USDC',
      '0.000109 USDC',
      '0.00005 USDC',
      '0.00262 USDC',
      '1,250.00 USDC',
      '1,234,567.89 USDC',
      '−0.30 USDC',
      '−0.00005 USDC',
    ]);
  });

  it('the DEFAULT top-up page says what each payment adds the same way: "adds 10.00 USDC", not 10.000000', async () => {
    const pw = await t.createPaywall('DEFAULT', 'Quill Notes');
    // The page's text only needs the amounts offered: the list the page renders, without Stripe calls.
    const html = renderDocument(
      DefaultTopupPage({
        name: 'Quill Notes',
        paywallId: pw.id,
        page: { session: null, csrf: 'x' } as never,
        user: 'bob',
        amounts: ['5', '10', '20'],
      }),
    );
    const text = html.replace(/<[^>]+>/g, '');
    expect(text).toContain("adds 10.00 USDC to bob's balance on Quill Notes");
    expect(text).toContain('every 1 USD you pay adds 1.00 USDC.');
    expect(text).not.toMatch(/\d\.\d{3,}0 USDC/);
  });
});

describe('every answer under the pages is a page, never the API JSON or "Cannot GET"', () => {
  const get = async (path: string, init?: RequestInit) => {
    const res = await fetch(`${t.url}${path}`, { redirect: 'manual', ...init });
    const html = await res.text();
    return {
      status: res.status,
      type: res.headers.get('content-type') ?? '',
      title: /<title>([^<]*)<\/title>/.exec(html)?.[1] ?? null,
      h1: /<h1>([^<]*)<\/h1>/.exec(html)?.[1] ?? null,
      html,
    };
  };

  it('an address that does not exist: 404 "Page not found" with a way back to the wallet', async () => {
    for (const path of ['/wallet/nothing-here', '/connect', '/wallet/keys/x', '/topup']) {
      const r = await get(path);
      expect([path, r.status, r.type, r.title, r.h1]).toEqual([
        path,
        404,
        'text/html; charset=utf-8',
        'Page not found · Paywall Proxy',
        'Page not found',
      ]);
      expect(r.html).not.toContain('Cannot GET');
    }
    expect((await get('/wallet/nothing-here')).html).toContain('<a href="/wallet">Go to your wallet</a>');
    // An app's own top-up page has no wallet: no wallet header or link on its 404 either.
    const app = await get('/topup/a/b/c');
    expect([app.status, app.title]).toEqual([404, 'Page not found · Paywall Proxy']);
    expect(app.html).not.toContain('Paywall Proxy Wallet');
  });

  it('an address a form posts to, opened with GET (back button, reload): 303 to the page the form was on', async () => {
    const cases = [
      ['/wallet/sign-in/code', '/wallet/sign-in'],
      ['/wallet/sign-out', '/wallet'],
      ['/wallet/alert', '/wallet'],
      ['/wallet/topup/checkout', '/wallet/topup'],
      ['/wallet/keys/abc/revoke', '/wallet'],
      ['/wallet/connections/abc/disconnect', '/wallet'],
      ['/wallet/connections/abc/allowance', '/wallet'],
      ['/connect/abc/approve', '/wallet'],
      ['/connect/abc/decline', '/wallet'],
    ];
    for (const [path, to] of cases) {
      const r = await get(path);
      expect([
        path,
        r.status,
        (await fetch(`${t.url}${path}`, { redirect: 'manual' })).headers.get('location'),
      ]).toEqual([path, 303, to]);
    }
  });

  it('a refusal is titled for what happened: a top-up of an app without card top-ups is not "Already decided"', async () => {
    const pw = await t.createPaywall('DEFAULT', 'No cards');
    const c = new PageClient(t.url);
    await c.get('/wallet/sign-in'); // a page with a form: the browser's CSRF token
    const r = await c.post(`/topup/${pw.id}/checkout`, { user: 'bob', amount: '10' });
    expect(r.status).toBe(409);
    expect(r.html).toContain('<title>Card top-ups not available · Paywall Proxy</title>');
    expect(r.html).toContain('This app has not set up card top-ups.');
    expect(r.html).not.toContain('Already decided');
  });

  it('a form too large, a garbled address: 413 and 400 pages that say what to do', async () => {
    const big = await get('/wallet/sign-in', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `email=${'a'.repeat(20_000)}`,
    });
    expect([big.status, big.type, big.title]).toEqual([
      413,
      'text/html; charset=utf-8',
      'Form too large · Paywall Proxy',
    ]);
    expect(big.html).not.toContain('"error"');
    const garbled = await get('/connect/%ff');
    expect([garbled.status, garbled.type, garbled.title]).toEqual([
      400,
      'text/html; charset=utf-8',
      'Request not understood · Paywall Proxy',
    ]);
  });

  it('a failure on our side: a 500 page with the request id to quote; the database away: 503 page', async () => {
    const pw = await t.createPaywall('DEFAULT', 'Broken app');
    const paywalls = t.app.services.paywalls;
    const original = paywalls.publicInfo;
    try {
      paywalls.publicInfo = async () => {
        throw new Error('boom: a bug');
      };
      const res = await fetch(`${t.url}/topup/${pw.id}?user=bob`);
      const html = await res.text();
      expect(res.status).toBe(500);
      expect(html).toContain('<title>Something went wrong · Paywall Proxy</title>');
      expect(html).toContain(`quote the reference ${res.headers.get('x-request-id')}.`);
      expect(html).not.toContain('boom');
      expect(html).not.toContain('Paywall Proxy Wallet'); // the app's page, not the wallet's
      paywalls.publicInfo = async () => {
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      };
      const down = await get(`/topup/${pw.id}?user=bob`);
      expect([down.status, down.title]).toEqual([503, 'Temporarily unavailable · Paywall Proxy']);
      expect(down.html).not.toContain('ECONNREFUSED');
    } finally {
      paywalls.publicInfo = original;
    }
  });
});
