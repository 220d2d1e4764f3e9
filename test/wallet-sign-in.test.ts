import { startTestApp, type TestApp } from './helpers/app.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { PageClient } from './helpers/page-client.js';
import { loadConfig } from '../src/config.js';

let t: TestApp;
let smtp: SmtpCatcher;
let ipSeq = 0;
/** Each test stands for its own client network, so the per-IP send limit never couples tests. */
const client = () => new PageClient(t.url, `198.51.100.${++ipSeq}`);

beforeAll(async () => {
  smtp = await startSmtpCatcher();
  t = await startTestApp({ SMTP_URL: smtp.url, WALLET_TEST_FUNDS: 'true' });
});
afterAll(async () => {
  await t?.close();
  await smtp?.close();
});

async function sendCode(c: PageClient, email: string, next?: string) {
  await c.get('/wallet/sign-in');
  return c.post('/wallet/sign-in', next ? { email, next } : { email });
}

async function signIn(c: PageClient, email: string, next?: string) {
  const sent = await sendCode(c, email, next);
  expect(sent.status).toBe(200);
  const code = await smtp.waitForCode(email);
  const res = await c.post('/wallet/sign-in/code', next ? { email, code, next } : { email, code });
  expect(res.status).toBe(303);
  return res;
}

async function connectLink(
  apiKey: string,
  user: string,
): Promise<{ url: string; path: string; requestId: string }> {
  const r = await t.rest('GET', `/v1/user/connect?user=${encodeURIComponent(user)}`, { token: apiKey });
  expect(r.status).toBe(200);
  expect(r.body.connected).toBe(false);
  const u = new URL(r.body.url);
  return { url: r.body.url, path: u.pathname + u.search, requestId: u.searchParams.get('request')! };
}

const events = (paywallId: string, type: string) =>
  t.db.query(`select data from event where paywall_id = $1 and type = $2 order by seq`, [paywallId, type]);

describe('wallet sign-in (e-mailed one-time code)', () => {
  it('serves the e-mail form with its label, field and button, and safe headers', async () => {
    const c = client();
    const res = await c.get('/wallet/sign-in');
    expect(res.status).toBe(200);
    expect(res.html).toMatch(/<label for="email">Email<\/label>/);
    expect(res.html).toMatch(/<input id="email" name="email" type="email"/);
    expect(res.html).toContain('<button type="submit">Send code</button>');
    expect(res.html).toMatch(/<form method="post" action="\/wallet\/sign-in">/);
    expect(res.html).toContain('<main');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('referrer-policy')).toBe('same-origin');
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(res.headers.get('content-security-policy')).not.toMatch(/script-src|unsafe-inline/);
    expect(c.csrf).toMatch(/^[\w-]{20,}$/);
    // Other paths are not the pages': no page headers, no CSRF cookie.
    const other = await fetch(`${t.url}/not-a-page`);
    expect(other.headers.get('x-frame-options')).toBeNull();
    expect(other.headers.getSetCookie()).toEqual([]);
  });

  it('a code works once; the session cookie is HttpOnly and SameSite=Lax; sign-out ends it', async () => {
    const c = client();
    const email = 'Once@Example.com';
    const sent = await sendCode(c, email);
    expect(sent.status).toBe(200);
    expect(sent.html).toMatch(/<label for="code">Code<\/label>/);
    expect(sent.html).toMatch(/<input id="code" name="code"/);
    expect(sent.html).toContain('<button type="submit">Sign in</button>');
    const mail = await smtp.waitForMessage('once@example.com');
    const code = /\b(\d{6})\b/.exec(mail.text)![1];
    expect(mail.text).toContain(code);

    const challenge = c.cookies.get('pp_sign_in')!;
    const challengeCookie = sent.headers.getSetCookie().find((l) => l.startsWith('pp_sign_in='))!;
    expect(challengeCookie).toMatch(/HttpOnly/i);
    expect(challengeCookie).toMatch(/Path=\/wallet\/sign-in/i);
    const ok = await c.post('/wallet/sign-in/code', { email: 'once@example.com', code });
    expect(ok.status).toBe(303);
    expect(c.cookies.has('pp_sign_in')).toBe(false); // the challenge ends with the sign-in
    expect(ok.location).toBe('/wallet');
    const setCookie = ok.headers.getSetCookie().find((l) => l.startsWith('pp_wallet_session='))!;
    expect(setCookie).toMatch(/HttpOnly/i);
    expect(setCookie).toMatch(/SameSite=Lax/i);
    expect(setCookie).not.toMatch(/Secure/i); // PUBLIC_BASE_URL is http:// here
    const wallet = await c.get('/wallet');
    expect(wallet.status).toBe(200);
    expect(wallet.html).toContain('once@example.com');
    const [stored] = await t.db.query(`select token_hash from wallet_session`);
    expect(setCookie).not.toContain(stored.token_hash); // the token is stored hashed only

    const again = await client().post('/wallet/sign-in/code', { email: 'once@example.com', code }, null);
    expect(again.status).toBe(403); // no CSRF token: refused before anything is checked
    const other = client();
    await other.get('/wallet/sign-in');
    // Another browser cannot use the code at all: it is bound to the browser that asked for it.
    const elsewhere = await other.post('/wallet/sign-in/code', { email: 'once@example.com', code });
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.html).toContain('No code is waiting for this address in this browser');
    // Even with the asking browser's challenge cookie replayed, the code works once.
    other.cookies.set('pp_sign_in', challenge);
    const reused = await other.post('/wallet/sign-in/code', { email: 'once@example.com', code });
    expect(reused.status).toBe(400);
    expect(reused.html).toContain('already used');
    expect(other.cookies.has('pp_wallet_session')).toBe(false);

    const out = await c.post('/wallet/sign-out', {});
    expect(out.status).toBe(303);
    expect((await c.get('/wallet')).status).toBe(303);
    expect((await t.db.query(`select count(*)::int as n from wallet_session`))[0].n).toBe(0);
  });

  it('the session cookie is Secure when PUBLIC_BASE_URL is https', async () => {
    const base = t.config.PUBLIC_BASE_URL;
    t.config.PUBLIC_BASE_URL = 'https://wallet.example';
    try {
      const c = client();
      const res = await signIn(c, 'secure@example.com');
      const line = res.headers.getSetCookie().find((l) => l.startsWith('pp_wallet_session='))!;
      expect(line).toMatch(/;\s*Secure/i);
      expect(line).toMatch(/HttpOnly/i);
      expect(line).toMatch(/Max-Age=2592000/i); // 30 days
    } finally {
      t.config.PUBLIC_BASE_URL = base;
    }
  });

  it('five wrong codes lock the code, even the right one afterwards', async () => {
    const c = client();
    const email = 'locked@example.com';
    await sendCode(c, email);
    const code = await smtp.waitForCode(email);
    const wrong = code === '000000' ? '111111' : '000000';
    for (let i = 1; i <= 4; i++) {
      const r = await c.post('/wallet/sign-in/code', { email, code: wrong });
      expect(r.status).toBe(400);
      expect(r.html).toContain(`${5 - i} ${5 - i === 1 ? 'try' : 'tries'} left`);
    }
    const fifth = await c.post('/wallet/sign-in/code', { email, code: wrong });
    expect(fifth.html).toContain('locked');
    const right = await c.post('/wallet/sign-in/code', { email, code });
    expect(right.status).toBe(400);
    expect(right.html).toContain('locked');
    expect(c.cookies.has('pp_wallet_session')).toBe(false);
    expect(
      (await t.db.query(`select count(*)::int as n from wallet_user where email = $1`, [email]))[0].n,
    ).toBe(0);
  });

  it('an expired code says so', async () => {
    const c = client();
    const email = 'late@example.com';
    await sendCode(c, email);
    const code = await smtp.waitForCode(email);
    await t.db.query(`update wallet_sign_in set expires_at = now() - interval '1 second' where email = $1`, [
      email,
    ]);
    const r = await c.post('/wallet/sign-in/code', { email, code });
    expect(r.status).toBe(400);
    expect(r.html).toContain('expired');
    expect(c.cookies.has('pp_wallet_session')).toBe(false);
  });

  it('limits codes per address and network, per address and per network, with one uniform answer', async () => {
    /** Codes that went out (a held-back request is recorded with `sent = false` and a code nobody knows). */
    const rowsOf = async (email: string) =>
      (
        await t.db.query(`select count(*)::int as n from wallet_sign_in where email = $1 and sent`, [email])
      )[0].n;
    const c = client();
    const email = 'many@example.com';
    const answers: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await sendCode(c, email);
      expect(r.status).toBe(200);
      answers.push(r.html);
      await smtp.waitForCode(email);
    }
    // The sixth from the same network is held back, and the answer is the very same page.
    const sixth = await sendCode(c, email);
    expect(sixth.status).toBe(200);
    expect(sixth.html).toBe(answers[4]);
    expect(sixth.html).toContain('If this address can sign in, we sent a 6-digit code to');
    expect(await rowsOf(email)).toBe(5);
    // Another network still gets a code for the address.
    const elsewhere = client();
    expect((await sendCode(elsewhere, email)).status).toBe(200);
    const real = await smtp.waitForCode(email);
    expect(await rowsOf(email)).toBe(6);
    const wrongFor = (code: string) => (code === '000000' ? '111111' : '000000');
    const afterSend = await elsewhere.post('/wallet/sign-in/code', { email, code: wrongFor(real) });
    expect(afterSend.html).toContain('That code is not right. 4 tries left.');

    // All networks together: at most 30 codes per address in 15 minutes.
    const flooded = 'flood@example.com';
    for (let i = 0; i < 6; i++) for (let j = 0; j < 5; j++) await sendCode(client(), flooded);
    expect(await rowsOf(flooded)).toBe(30);
    const lateClient = client();
    const late = await sendCode(lateClient, flooded);
    expect(late.status).toBe(200);
    expect(late.html).toContain('If this address can sign in, we sent a 6-digit code to');
    expect(await rowsOf(flooded)).toBe(30);
    // Typing a code after a held-back request answers as after a real send: nothing tells them apart.
    const afterHeld = await lateClient.post('/wallet/sign-in/code', { email: flooded, code: '000000' });
    expect(afterHeld.status).toBe(afterSend.status);
    expect(afterHeld.html).toContain('That code is not right. 4 tries left.');

    // One network: at most 20 codes in 15 minutes, whatever the addresses.
    const net = client();
    for (let i = 0; i < 20; i++) expect((await sendCode(net, `ip${i}@example.com`)).status).toBe(200);
    const over = await sendCode(net, 'ip-last@example.com');
    expect(over.status).toBe(200);
    expect(await rowsOf('ip-last@example.com')).toBe(0);
    await smtp.waitForCode('ip19@example.com');
    expect(smtp.messages.some((m) => m.to.includes('ip-last@example.com'))).toBe(false);
  });

  it("a stranger's sends and wrong guesses cannot lock the owner out; the answer never tells", async () => {
    const email = 'owner@example.com';
    const attacker = client();
    const sends: string[] = [];
    for (let i = 0; i < 6; i++) sends.push((await sendCode(attacker, email)).html);
    const theirs = new Set<string>();
    for (let i = 0; i < 5; i++) theirs.add(await smtp.waitForCode(email)); // the sixth was held back
    const wrong = ['000000', '111111', '222222', '333333', '444444', '555555'].find((w) => !theirs.has(w))!;
    // Five wrong guesses lock the stranger's own codes, nobody else's.
    for (let i = 0; i < 5; i++)
      expect((await attacker.post('/wallet/sign-in/code', { email, code: wrong })).status).toBe(400);
    expect((await attacker.post('/wallet/sign-in/code', { email, code: wrong })).html).toContain('locked');
    // Guesses from a browser that never asked count against nothing.
    const drive = client();
    await drive.get('/wallet/sign-in');
    for (let i = 0; i < 5; i++)
      expect((await drive.post('/wallet/sign-in/code', { email, code: String(100000 + i) })).html).toContain(
        'No code is waiting',
      );

    const owner = client();
    const answer = await sendCode(owner, email);
    expect(answer.status).toBe(200);
    // The same page whether a code was sent (owner, stranger's first five) or held back (stranger's sixth),
    // but for the per-browser form token.
    const page = (h: string) => h.replace(/name="csrf" value="[^"]*"/g, 'name="csrf" value=""');
    expect(page(sends[5])).toBe(page(sends[0]));
    expect(page(answer.html)).toBe(page(sends[5]));
    const code = await smtp.waitForCode(email);
    const ok = await owner.post('/wallet/sign-in/code', { email, code });
    expect(ok.status).toBe(303);
    expect(owner.cookies.has('pp_wallet_session')).toBe(true);
    expect(attacker.cookies.has('pp_wallet_session')).toBe(false);
  });

  it("strangers cannot use up the owner's codes: an IPv6 /64 counts as one network, and the owner's own browser has its own allowance", async () => {
    const email = 'v6owner@example.com';
    /** Whether the latest request for the address e-mailed a code (held-back ones are recorded unsent). */
    const lastSent = async () =>
      (
        await t.db.query(
          `select sent from wallet_sign_in where email = $1 order by created_at desc, id desc limit 1`,
          [email],
        )
      )[0].sent as boolean;
    // The owner signed in from this browser once (and signed out): it is a known browser now.
    const owner = new PageClient(t.url, '203.0.113.77');
    await signIn(owner, email);
    expect(owner.cookies.has('pp_wallet_browser')).toBe(true);
    await owner.post('/wallet/sign-out', {});
    await smtp.waitForCode(email).catch(() => undefined);

    // 5 requests from each of 6 addresses of one /64 (behind the trusted proxy): one network, 5 codes.
    for (let host = 1; host <= 6; host++)
      for (let i = 0; i < 5; i++) await sendCode(new PageClient(t.url, `2001:db8:77:1::${host}`), email);
    const mailed = async () =>
      (
        await t.db.query(`select count(*)::int as n from wallet_sign_in where email = $1 and sent`, [email])
      )[0].n as number;
    expect(await mailed()).toBe(1 + 5);
    // The owner from a new browser elsewhere still gets a code.
    await sendCode(new PageClient(t.url, '203.0.113.78'), email);
    expect(await lastSent()).toBe(true);

    // Strangers on 5 more networks (IPv4 addresses, /64s) use up the address's 30 codes for everyone new…
    for (const ip of ['2001:db8:77:2::1', '2001:db8:77:3::9', '198.18.0.1', '198.18.0.2', '198.18.0.3'])
      for (let i = 0; i < 5; i++) await sendCode(new PageClient(t.url, ip), email);
    await sendCode(new PageClient(t.url, '203.0.113.79'), email);
    expect(await lastSent()).toBe(false);
    // …but not for the owner's own browser: a code, and it signs in.
    for (;;) if (!(await smtp.waitForCode(email, 200).catch(() => null))) break;
    expect((await sendCode(owner, email)).status).toBe(200);
    expect(await lastSent()).toBe(true);
    const code = await smtp.waitForCode(email);
    expect((await owner.post('/wallet/sign-in/code', { email, code })).status).toBe(303);
    expect(owner.cookies.has('pp_wallet_session')).toBe(true);
  });

  it('refuses addresses that cannot be delivered (NUL, control characters, stray dots): 400, nothing sent', async () => {
    const c = client();
    await c.get('/wallet/sign-in');
    const count = async () => (await t.db.query(`select count(*)::int as n from wallet_sign_in`))[0].n;
    const before = await count();
    const bad = [
      'nul\u0000@example.com',
      'ctl\u0001x@example.com',
      'tab\tx@example.com',
      'trailing@example.com.',
      'double..dot@example.com',
      '.lead@example.com',
      'lead.@example.com',
      'x@example..com',
      'x@.example.com',
      'x@-example.com',
      'x@example',
      'two@at@example.com',
      'x@127.0.0.1',
      'not an address',
      `${'a'.repeat(65)}@example.com`,
    ];
    for (const email of bad) {
      const r = await c.post('/wallet/sign-in', { email });
      expect([email, r.status]).toEqual([email, 400]);
      expect(r.html).toContain('Enter a valid email address');
      expect(r.html).toContain('<button type="submit">Send code</button>');
    }
    expect(await count()).toBe(before);
    // Ordinary addresses still pass (plus, hyphen, subdomain, upper case folded).
    for (const ok of ['Jo.Ann+ai@mail.example-co.uk', "o'brien@example.com"])
      expect((await c.post('/wallet/sign-in', { email: ok })).status).toBe(200);
    expect(await count()).toBe(before + 2);
  });

  it('a POST without or with a wrong CSRF token is a 403 page and changes nothing', async () => {
    const c = client();
    await c.get('/wallet/sign-in');
    const count = async () => (await t.db.query(`select count(*)::int as n from wallet_sign_in`))[0].n;
    const n = await count();
    const none = await c.post('/wallet/sign-in', { email: 'csrf@example.com' }, null);
    expect(none.status).toBe(403);
    expect(none.html).toContain('not accepted');
    const wrong = await c.post('/wallet/sign-in', { email: 'csrf@example.com' }, 'x'.repeat(43));
    expect(wrong.status).toBe(403);
    // Another browser's token does not fit this browser's cookie.
    const other = client();
    await other.get('/wallet/sign-in');
    expect((await c.post('/wallet/sign-in', { email: 'csrf@example.com' }, other.csrf)).status).toBe(403);
    expect(await count()).toBe(n);
  });
});

describe('consent, wallet page and revocation', () => {
  it('approve connects the end user to the wallet once; the API then says connected', async () => {
    const pw = await t.createPaywall('SHARED', 'Acme <Writer>');
    await t.db.query(`update paywall set description = $2 where id = $1`, [
      pw.id,
      'Drafts & edits your essays.',
    ]);
    const link = await connectLink(pw.apiKey, 'alice');
    const c = client();
    const first = await c.get(link.path);
    expect(first.status).toBe(303);
    expect(first.location).toBe(`/wallet/sign-in?next=${encodeURIComponent(link.path)}`);
    const signed = await signIn(c, 'alice@example.com', link.path);
    expect(signed.location).toBe(link.path);
    const consent = await c.get(link.path);
    expect(consent.status).toBe(200);
    expect(consent.html).toContain('Acme &lt;Writer&gt;');
    expect(consent.html).not.toContain('<Writer>');
    expect(consent.html).toContain('Drafts &amp; edits your essays.');
    expect(consent.html).toContain('<button type="submit">Approve</button>');
    expect(consent.html).toMatch(/<button type="submit" class="secondary">Decline<\/button>/);

    const ok = await c.post(`/connect/${pw.id}/approve`, { request: link.requestId });
    expect(ok.status).toBe(200);
    expect(ok.html).toContain('is connected');
    const twice = await c.post(`/connect/${pw.id}/approve`, { request: link.requestId });
    expect(twice.status).toBe(409);
    expect(twice.html).toContain('already approved');
    // Not an error to the person: the app is connected. An information box (not a red alert) and the way on.
    expect(twice.html).toContain('<div class="alert info" role="status">This request was already approved');
    expect(twice.html).toContain('<a href="/wallet">Go to your wallet</a>');

    const [wu] = await t.db.query(`select id, account_id from wallet_user where email = 'alice@example.com'`);
    const status = await t.rest('GET', '/v1/user/connect?user=alice', { token: pw.apiKey });
    expect(status.body).toMatchObject({
      connected: true,
      connectedUser: { paywallKeyId: pw.id, userId: wu.id, externalUserId: 'alice' },
    });
    const [eu] = await t.db.query(`select account_id, wallet_user_id from end_user where paywall_id = $1`, [
      pw.id,
    ]);
    expect(eu).toEqual({ account_id: wu.account_id, wallet_user_id: wu.id });
    const completed = await events(pw.id, 'paywall.authorization.completed');
    expect(completed).toHaveLength(1);
    const [conn] = await t.db.query(
      `select id from wallet_connection where end_user_id is not null and paywall_id = $1`,
      [pw.id],
    );
    expect(completed[0].data).toMatchObject({
      paywallId: pw.id,
      externalUserId: 'alice',
      walletUserId: wu.id,
      connectionId: conn.id,
    });
    expect(completed[0].data.ownerUserId).toEqual(expect.any(String));

    const wallet = await c.get('/wallet');
    expect(wallet.html).toContain('Acme &lt;Writer&gt;');
    expect(wallet.html).toContain(`/wallet/connections/${conn.id}/disconnect`);
  });

  it('decline records the refusal; the user still gets a connect link', async () => {
    const pw = await t.createPaywall('SHARED', 'Declined app');
    const link = await connectLink(pw.apiKey, 'dora');
    const c = client();
    await signIn(c, 'dora@example.com');
    await c.get(link.path);
    const res = await c.post(`/connect/${pw.id}/decline`, { request: link.requestId });
    expect(res.status).toBe(200);
    expect(res.html).toContain('declined');
    const [wu] = await t.db.query(`select id from wallet_user where email = 'dora@example.com'`);
    const declined = await events(pw.id, 'paywall.authorization.declined');
    expect(declined.map((e) => e.data)).toEqual([
      expect.objectContaining({
        requestId: link.requestId,
        reason: 'user_declined',
        walletUserId: wu.id,
        externalUserId: 'dora',
      }),
    ]);
    const decided = await c.post(`/connect/${pw.id}/approve`, { request: link.requestId });
    expect(decided.status).toBe(409);
    // Decided either way: the signed-in wallet user is shown the way to the wallet, as after an approval.
    expect(decided.html).toContain('<a href="/wallet">Go to your wallet</a>');
    const again = await t.rest('GET', '/v1/user/connect?user=dora', { token: pw.apiKey });
    expect(again.body.connected).toBe(false);
    expect(again.body.url).toContain(`/connect/${pw.id}?`);
  });

  it("another wallet's session can neither approve with a stolen token, nor revoke, nor read", async () => {
    const pw = await t.createPaywall('SHARED', 'Private app');
    const link = await connectLink(pw.apiKey, 'erin');
    const a = client();
    await signIn(a, 'erin@example.com');
    await a.get(link.path);
    const aToken = a.csrf;
    const b = client();
    await signIn(b, 'mallory@example.com');
    await b.get('/wallet');
    // B's cookie with A's form token: refused.
    expect((await b.post(`/connect/${pw.id}/approve`, { request: link.requestId }, aToken)).status).toBe(403);
    expect(
      (await t.db.query(`select status from connect_request where id = $1`, [link.requestId]))[0].status,
    ).toBe('pending');
    expect((await a.post(`/connect/${pw.id}/approve`, { request: link.requestId })).status).toBe(200);
    const [conn] = await t.db.query(`select id from wallet_connection where paywall_id = $1`, [pw.id]);

    const bWallet = await b.get('/wallet');
    expect(bWallet.html).not.toContain('Private app');
    expect(bWallet.html).not.toContain(conn.id);
    expect((await b.post(`/wallet/connections/${conn.id}/disconnect`, {})).status).toBe(404);
    const revoke = await b.post(`/wallet/connections/${conn.id}/disconnect`, { confirm: 'yes' });
    expect(revoke.status).toBe(404);
    expect((await t.rest('GET', '/v1/user/connect?user=erin', { token: pw.apiKey })).body.connected).toBe(
      true,
    );
    expect(await events(pw.id, 'paywall.authorization.revoked')).toHaveLength(0);
    // Without a session, wallet pages send to sign-in.
    const anon = client();
    const w = await anon.get('/wallet');
    expect(w.status).toBe(303);
    expect(w.location).toBe('/wallet/sign-in?next=%2Fwallet');
  });

  it('a connect link of paywall A cannot connect to paywall B; unknown and expired links say so', async () => {
    const a = await t.createPaywall('SHARED', 'App A');
    const b = await t.createPaywall('SHARED', 'App B');
    const link = await connectLink(a.apiKey, 'frank');
    const c = client();
    await signIn(c, 'frank@example.com');
    const foreign = await c.get(`/connect/${b.id}?request=${link.requestId}`);
    expect(foreign.status).toBe(404);
    expect(foreign.html).toContain('not valid');
    await c.get(link.path);
    expect((await c.post(`/connect/${b.id}/approve`, { request: link.requestId })).status).toBe(404);
    expect((await c.post(`/connect/${b.id}/decline`, { request: link.requestId })).status).toBe(404);
    expect((await c.get(`/connect/${a.id}?request=00000000-0000-4000-8000-000000000000`)).status).toBe(404);
    expect((await c.get(`/connect/${a.id}`)).status).toBe(404);
    expect(
      (
        await t.db.query(
          `select count(*)::int as n from wallet_connection where paywall_id = any($1::uuid[])`,
          [[a.id, b.id]],
        )
      )[0].n,
    ).toBe(0);

    await t.db.query(`update connect_request set expires_at = now() - interval '1 second' where id = $1`, [
      link.requestId,
    ]);
    const expired = await c.get(link.path);
    expect(expired.status).toBe(410);
    expect(expired.html).toContain('expired');
    // Checked before sign-in too.
    expect((await client().get(link.path)).status).toBe(410);
    await c.get('/wallet');
    expect((await c.post(`/connect/${a.id}/approve`, { request: link.requestId })).status).toBe(410);
    expect((await t.rest('GET', '/v1/user/connect?user=frank', { token: a.apiKey })).body.connected).toBe(
      false,
    );
  });

  it('Disconnect on the wallet page and GET /v1/user/disconnect revoke, once', async () => {
    const pw = await t.createPaywall('SHARED', 'Revocable');
    const c = client();
    await signIn(c, 'gina@example.com');
    for (const user of ['g1', 'g2']) {
      const link = await connectLink(pw.apiKey, user);
      await c.get(link.path);
      expect((await c.post(`/connect/${pw.id}/approve`, { request: link.requestId })).status).toBe(200);
    }
    const [wu] = await t.db.query(`select id from wallet_user where email = 'gina@example.com'`);
    const [g1] = await t.db.query(
      `select c.id from wallet_connection c join end_user u on u.id = c.end_user_id where u.external_id = 'g1' and c.paywall_id = $1`,
      [pw.id],
    );
    await c.get('/wallet');
    // A Disconnect POST without confirm=yes (the wallet page's form sends it) asks: nothing revoked yet.
    const ask = await c.post(`/wallet/connections/${g1.id}/disconnect`, {});
    expect(ask.status).toBe(200);
    expect(ask.html).toContain('Disconnect <span class="app-name">Revocable</span>?');
    expect(ask.html).toContain('It will no longer be able to charge your wallet.');
    expect(ask.html).toMatch(/<button type="submit" class="danger-solid">Disconnect<\/button>/);
    expect(ask.html).toContain('<input type="hidden" name="confirm" value="yes"/>');
    expect(ask.html).toMatch(/<a class="button secondary" href="\/wallet">Cancel<\/a>/);
    expect(await events(pw.id, 'paywall.authorization.revoked')).toHaveLength(0);
    expect((await t.rest('GET', '/v1/user/connect?user=g1', { token: pw.apiKey })).body.connected).toBe(true);
    const res = await c.post(`/wallet/connections/${g1.id}/disconnect`, { confirm: 'yes' });
    expect(res.status).toBe(303);
    expect(res.location).toBe('/wallet?done=disconnected');
    // Already revoked: a no-op, asked or confirmed.
    expect((await c.post(`/wallet/connections/${g1.id}/disconnect`, { confirm: 'yes' })).status).toBe(303);
    const again = await c.post(`/wallet/connections/${g1.id}/disconnect`, {});
    expect(again.status).toBe(303);
    expect(again.location).toBe('/wallet?done=disconnected');
    const api = await t.rest('GET', '/v1/user/disconnect?user=g2', { token: pw.apiKey });
    expect(api.body).toEqual({ success: true, message: expect.stringContaining('disconnected') });
    const none = await t.rest('GET', '/v1/user/disconnect?user=g2', { token: pw.apiKey });
    expect(none.body).toEqual({ success: true, message: expect.stringContaining('not connected') });
    const revoked = await events(pw.id, 'paywall.authorization.revoked');
    expect(revoked.map((e) => e.data.externalUserId).sort()).toEqual(['g1', 'g2']);
    expect(revoked.every((e) => e.data.walletUserId === wu.id)).toBe(true);
    const rows = await t.db.query(
      `select account_id, wallet_user_id, connected_at from end_user where paywall_id = $1`,
      [pw.id],
    );
    expect(
      rows.every((r) => r.account_id === null && r.wallet_user_id === null && r.connected_at === null),
    ).toBe(true);
    expect((await t.rest('GET', '/v1/user/connect?user=g1', { token: pw.apiKey })).body.connected).toBe(
      false,
    );
    expect((await c.get('/wallet')).html).not.toContain('Revocable');
  });

  it('test funds: one deposit transfer world → wallet and one event per connected paywall', async () => {
    const p1 = await t.createPaywall('SHARED', 'Funds one');
    const p2 = await t.createPaywall('SHARED', 'Funds two');
    const c = client();
    await signIn(c, 'hana@example.com');
    for (const pw of [p1, p2]) {
      const link = await connectLink(pw.apiKey, 'hana');
      await c.get(link.path);
      await c.post(`/connect/${pw.id}/approve`, { request: link.requestId });
    }
    const topup = await c.get('/wallet/topup');
    expect(topup.html).toMatch(/<label for="amount">Amount<\/label>/);
    // Opened from an app's top-up link (the URL GET /v1/user/balance/topup and the blocked replies hand
    // out): which app sent the person, and the balance, before the form.
    const url = (await t.rest('GET', '/v1/user/balance/topup?user=hana', { token: p1.apiKey })).body.url;
    const low = await c.get(new URL(url).pathname + new URL(url).search);
    expect(low.html).toContain(
      '<div class="alert info" role="status">Funds one sent you here to add funds. Your balance is 0.00 USDC.</div>',
    );
    // A paywall this wallet is not connected to (a crafted link) is not named.
    const other = await t.createPaywall('SHARED', 'Not yours');
    expect((await c.get(`/wallet/topup?paywall=${other.id}&user=hana`)).html).not.toContain('sent you here');
    expect((await c.get(`/wallet/topup?paywall=not-a-uuid`)).status).toBe(200);
    expect(topup.html).toContain('<button type="submit">Add test funds</button>');
    for (const bad of ['1000.000001', '0', '-1', 'abc', '1e3'])
      expect((await c.post('/wallet/topup', { amount: bad })).status).toBe(400);
    expect((await c.post('/wallet/topup', { amount: '12.5' }, null)).status).toBe(403);
    const ok = await c.post('/wallet/topup', { amount: '12.5' });
    expect(ok.status).toBe(303);
    expect(ok.location).toBe('/wallet?done=funds');

    const [wu] = await t.db.query(`select id, account_id from wallet_user where email = 'hana@example.com'`);
    const transfers = await t.db.query(
      `select kind, amount_raw::text as amount, metadata, debit_account_id from transfer where credit_account_id = $1`,
      [wu.account_id],
    );
    expect(transfers).toHaveLength(1);
    expect(transfers[0]).toMatchObject({
      kind: 'deposit',
      amount: '12500000',
      metadata: { source: 'test_funds' },
    });
    const [world] = await t.db.query(`select kind from ledger_account where id = $1`, [
      transfers[0].debit_account_id,
    ]);
    expect(world.kind).toBe('world');
    for (const pw of [p1, p2]) {
      const dep = await events(pw.id, 'paywall.balance.deposit.created');
      expect(dep.map((e) => e.data)).toEqual([
        expect.objectContaining({
          amount: '12.5',
          source: 'test_funds',
          walletUserId: wu.id,
          externalUserId: 'hana',
        }),
      ]);
      const bal = await t.rest('GET', '/v1/user/balance?user=hana', { token: pw.apiKey });
      expect(bal.body).toMatchObject({ balance: '12500000', balanceFormatted: '12.500000' });
    }
    const [sum] = await t.db.query(`select sum(balance_raw)::text as total from ledger_account`);
    expect(sum.total).toBe('0');
    const wallet = await c.get('/wallet?done=funds');
    expect(wallet.html).toContain('12.50 USDC');
    expect(wallet.html).toContain('Test funds');
  });

  it('test funds: the same form posted again (a double click, a resend), even at once, credits once and answers the same; a new form credits again', async () => {
    const pw = await t.createPaywall('SHARED', 'Funds once');
    const c = client();
    await signIn(c, 'ines@example.com');
    const link = await connectLink(pw.apiKey, 'ines');
    await c.get(link.path);
    await c.post(`/connect/${pw.id}/approve`, { request: link.requestId });
    const page = await c.get('/wallet/topup');
    const formToken = /name="formToken" value="([^"]+)"/.exec(page.html)![1];
    const posts = await Promise.all([1, 2, 3].map(() => c.post('/wallet/topup', { amount: '3', formToken })));
    const again = await c.post('/wallet/topup', { amount: '3', formToken });
    for (const r of [...posts, again]) expect([r.status, r.location]).toEqual([303, '/wallet?done=funds']);
    const balance = async () =>
      (await t.rest('GET', '/v1/user/balance?user=ines', { token: pw.apiKey })).body.balance;
    expect(await balance()).toBe('3000000');
    expect(await events(pw.id, 'paywall.balance.deposit.created')).toHaveLength(1);
    // The page renders a fresh form each time: a new submission is a new deposit.
    const next = /name="formToken" value="([^"]+)"/.exec((await c.get('/wallet/topup')).html)![1];
    expect(next).not.toBe(formToken);
    await c.post('/wallet/topup', { amount: '3', formToken: next });
    expect(await balance()).toBe('6000000');
  });
});

describe('races and redirects', () => {
  it('concurrent Approve clicks connect once and record one event', async () => {
    const pw = await t.createPaywall('SHARED', 'Racy app');
    const link = await connectLink(pw.apiKey, 'quinn');
    const c = client();
    await signIn(c, 'quinn@example.com');
    await c.get(link.path);
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => c.post(`/connect/${pw.id}/approve`, { request: link.requestId })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409, 409, 409]);
    expect(await events(pw.id, 'paywall.authorization.completed')).toHaveLength(1);
    const conns = await t.db.query(`select id from wallet_connection where paywall_id = $1`, [pw.id]);
    expect(conns).toHaveLength(1);

    // Concurrent revokes (the page twice and the API at once) record one revocation.
    await c.get('/wallet');
    await Promise.all([
      c.post(`/wallet/connections/${conns[0].id}/disconnect`, { confirm: 'yes' }),
      t.rest('GET', '/v1/user/disconnect?user=quinn', { token: pw.apiKey }),
      c.post(`/wallet/connections/${conns[0].id}/disconnect`, { confirm: 'yes' }),
    ]);
    expect(await events(pw.id, 'paywall.authorization.revoked')).toHaveLength(1);
  });

  it('after sign-in, only same-origin page paths are followed', async () => {
    const unsafe = [
      'https://evil.example/',
      '//evil.example/wallet',
      '/\\evil.example',
      '/graphql',
      'javascript:alert(1)',
    ];
    for (const [i, next] of unsafe.entries()) {
      const res = await signIn(client(), `next${i}@example.com`, next);
      expect(res.location).toBe('/wallet');
    }
    const res = await signIn(client(), 'next-ok@example.com', '/wallet/topup?paywall=x&user=a+b%40c');
    expect(res.location).toBe('/wallet/topup?paywall=x&user=a+b%40c');
  });
});

describe('without test funds or a payment processor', () => {
  it('the top-up page says card top-ups are not configured, and test funds are refused', async () => {
    const plain = await startTestApp({ SMTP_URL: smtp.url });
    try {
      const c = new PageClient(plain.url, '203.0.113.77');
      await c.get('/wallet/sign-in');
      await c.post('/wallet/sign-in', { email: 'ivy@example.com' });
      const code = await smtp.waitForCode('ivy@example.com');
      await c.post('/wallet/sign-in/code', { email: 'ivy@example.com', code });
      const page = await c.get('/wallet/topup');
      expect(page.status).toBe(200);
      expect(page.html).toContain('Card top-ups are not configured on this server');
      expect(page.html).not.toContain('Add test funds');
      expect((await c.post('/wallet/topup', { amount: '5' })).status).toBe(403);
      expect(
        (
          await plain.db.query(
            `select count(*)::int as n from transfer where metadata->>'source' = 'test_funds'`,
          )
        )[0].n,
      ).toBe(0);
    } finally {
      await plain.close();
    }
  });
});

describe('mail and configuration', () => {
  it('without SMTP_URL the sign-in e-mail, code included, is written to the log', async () => {
    const lines: string[] = [];
    const dev = await startTestApp(
      { LOG_LEVEL: 'info' },
      { logStream: { write: (l: string) => lines.push(l) } },
    );
    try {
      const c = new PageClient(dev.url, '203.0.113.78');
      await c.get('/wallet/sign-in');
      expect((await c.post('/wallet/sign-in', { email: 'dev@example.com' })).status).toBe(200);
      const mail = lines.map((l) => JSON.parse(l)).find((l) => l.mail?.to === 'dev@example.com');
      expect(mail.level).toBe(30); // info
      const code = /\b(\d{6})\b/.exec(mail.mail.text)![1];
      expect((await c.post('/wallet/sign-in/code', { email: 'dev@example.com', code })).status).toBe(303);
    } finally {
      await dev.close();
    }
  });

  it('SMTP_URL must be smtp:// or smtps://; MAIL_FROM and WALLET_TEST_FUNDS have safe defaults', () => {
    expect(() => loadConfig({ SMTP_URL: 'http://mail.example:25' })).toThrow(/SMTP_URL/);
    expect(loadConfig({ SMTP_URL: 'smtps://u:p@mail.example:465' }).SMTP_URL).toBe(
      'smtps://u:p@mail.example:465',
    );
    const c = loadConfig({});
    expect(c.SMTP_URL).toBeUndefined();
    expect(c.MAIL_FROM).toBe('Paywall Proxy <no-reply@localhost>');
    expect(c.WALLET_TEST_FUNDS).toBe(false);
    expect(loadConfig({ WALLET_TEST_FUNDS: 'true' }).WALLET_TEST_FUNDS).toBe(true);
  });

  it('SHARED_MAX_MANUAL_CHARGE: USDC decimal, default 5, parsed to raw units; anything else stops the start', () => {
    expect(loadConfig({}).SHARED_MAX_MANUAL_CHARGE).toBe(5_000_000n);
    expect(loadConfig({ SHARED_MAX_MANUAL_CHARGE: '' }).SHARED_MAX_MANUAL_CHARGE).toBe(5_000_000n);
    expect(loadConfig({ SHARED_MAX_MANUAL_CHARGE: '12.345678' }).SHARED_MAX_MANUAL_CHARGE).toBe(12_345_678n);
    for (const bad of ['0', '-1', 'abc', '1e3', '0.0000001'])
      expect(() => loadConfig({ SHARED_MAX_MANUAL_CHARGE: bad })).toThrow(/SHARED_MAX_MANUAL_CHARGE/);
  });
});

describe('housekeeping', () => {
  it('purges codes after a day, sessions and connect links after they expired; live ones stay', async () => {
    const old = client();
    await signIn(old, 'purge-old@example.com');
    const fresh = client();
    await signIn(fresh, 'purge-fresh@example.com');
    const p = await t.createPaywall('SHARED');
    const stale = await connectLink(p.apiKey, 'purge-user');
    // Age the first address's rows and the connect link past their retention.
    await t.db.query(
      `update wallet_sign_in set created_at = now() - interval '25 hours' where email = 'purge-old@example.com'`,
    );
    await t.db.query(
      `update wallet_session set expires_at = now() - interval '25 hours'
        where wallet_user_id = (select id from wallet_user where email = 'purge-old@example.com')`,
    );
    await t.db.query(`update connect_request set expires_at = now() - interval '31 days' where id = $1`, [
      stale.requestId,
    ]);

    const purged = await t.app.services.signIn.purgeExpired();
    expect(purged).toEqual({ codes: 1, sessions: 1, connectRequests: 1, knownBrowsers: 0 });
    const left = await t.db.query(
      `select email from wallet_sign_in where email like 'purge-%@example.com' order by email`,
    );
    expect(left).toEqual([{ email: 'purge-fresh@example.com' }]);
    // The purged session no longer opens the wallet; the live one does.
    expect((await old.get('/wallet')).status).toBe(303);
    const page = await fresh.get('/wallet');
    expect(page.status).toBe(200);
    expect(page.html).toContain('purge-fresh@example.com');
    // A second run finds nothing more.
    expect(await t.app.services.signIn.purgeExpired()).toEqual({
      codes: 0,
      sessions: 0,
      connectRequests: 0,
      knownBrowsers: 0,
    });
  });
});
