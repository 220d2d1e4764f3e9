import { startTestApp, type TestApp } from './helpers/app.js';

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
