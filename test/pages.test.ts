import { startTestApp, type TestApp } from './helpers/app.js';
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
