import { FakeUpstream } from './helpers/fake-upstream.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { expectLedgerProven } from './helpers/ledger.js';
import { PageClient } from './helpers/page-client.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { createProxyPaywall, deposit, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { connectEndUser } from './helpers/wallet-fixtures.js';
import { LOW_BALANCE_SUBJECT } from '../src/modules/ledger/low-balance.js';
import { launchBrowser, screenshot } from './helpers/browser.js';

/**
 * Low-balance alerts (docs/reference.md §16 "Low balance"): `paywall.balance.low` once per crossing of the
 * paywall's threshold, also when 50 charges cross it at once; again after money lifted the balance back;
 * never (and without an extra statement) when no threshold is set; the wallet user's own threshold, set
 * on the wallet page, sends one e-mail per crossing.
 */
const CHAT_COST = 1086n; // 11 prompt + 7 completion tokens at the proxy-setup prices, markup 1.5

let t: TestApp;
let fake: FakeUpstream;
let smtp: SmtpCatcher;
/** Calls of the low-balance check statement (its prepared statement's name), counted on the service's pool. */
let checks = 0;

beforeAll(async () => {
  fake = await FakeUpstream.start();
  smtp = await startSmtpCatcher();
  t = await startTestApp({ SMTP_URL: smtp.url, WALLET_TEST_FUNDS: 'true', SHARED_MAX_MANUAL_CHARGE: '5' });
  const query = t.db.query.bind(t.db);
  t.db.query = ((text: string, params?: unknown[], name?: string) => {
    if (name === 'low_balance_check') checks++;
    return query(text, params, name);
  }) as typeof t.db.query;
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
  await smtp?.close();
});

const usdc = (raw: bigint) => {
  const s = raw.toString().padStart(7, '0');
  return `${s.slice(0, -6)}.${s.slice(-6)}`;
};
const raw = (decimal: string) => {
  const [i, f = ''] = decimal.split('.');
  return BigInt(i) * 1_000_000n + BigInt(f.padEnd(6, '0'));
};

async function setThreshold(pw: ProxyPaywall, value: string | null) {
  const r = await t.gql(
    pw.apiKey,
    `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { lowBalanceThreshold } }`,
    { i: { lowBalanceThreshold: value } },
  );
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data.updatePaywall.lowBalanceThreshold;
}

const lowEvents = (pw: ProxyPaywall) =>
  t.db.query(
    `select data, subject from event where paywall_id = $1 and type = 'paywall.balance.low' order by seq`,
    [pw.id],
  );

/** A chat (max_tokens 10: a small hold) through the proxy; returns the free balance it answered. */
async function chat(pw: ProxyPaywall, user: string): Promise<bigint> {
  const r = await t.rest('POST', '/v1/chat/completions', {
    token: pw.apiKey,
    headers: { 'x-paywall-user': user },
    body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 },
  });
  expect(r.status).toBe(200);
  expect(r.body.paywall).toBeUndefined();
  return raw(r.headers.get('x-paywall-balance')!);
}

/** A manual charge (GraphQL `charge`); returns the free balance it answered (raw units). */
async function charge(pw: ProxyPaywall, user: string, amount: bigint): Promise<bigint> {
  const r = await t.gql(
    pw.apiKey,
    `mutation($input: ChargeInput!) { charge(input: $input) { success message balance } }`,
    { input: { user, amount: usdc(amount) } },
  );
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  expect(r.data.charge).toMatchObject({ success: true });
  return BigInt(r.data.charge.balance);
}

async function endUserId(pw: ProxyPaywall, user: string): Promise<string> {
  const [r] = await t.db.query(`select id from end_user where paywall_id = $1 and external_id = $2`, [
    pw.id,
    user,
  ]);
  return r.id;
}

describe('paywall.balance.low (the paywall threshold)', () => {
  let pw: ProxyPaywall;
  const threshold = 80_000n; // 0.08 USDC

  beforeAll(async () => {
    pw = await createProxyPaywall(t, fake);
  });

  it('updatePaywall sets, reads and clears lowBalanceThreshold; refuses what is not a positive amount', async () => {
    expect(await setThreshold(pw, '0.5')).toBe('0.500000');
    expect(await setThreshold(pw, null)).toBeNull();
    for (const bad of ['0', '-1', 'abc', '1.0000001']) {
      const r = await t.gql(
        pw.apiKey,
        `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { lowBalanceThreshold } }`,
        { i: { lowBalanceThreshold: bad } },
      );
      expect(r.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      expect(r.errors?.[0]?.message).toContain('lowBalanceThreshold');
    }
    expect(await setThreshold(pw, usdc(threshold))).toBe('0.080000');
    const [updated] = await t.db.query(
      `select data from event where paywall_id = $1 and type = 'paywall.updated' order by seq desc limit 1`,
      [pw.id],
    );
    expect(updated.data.changedFields).toEqual(['lowBalanceThreshold']);
  });

  it('50 concurrent chats crossing it record exactly one event, with the balance a crossing charge answered', async () => {
    await deposit(t, pw, 'ann', '0.1');
    const balances = await Promise.all(Array.from({ length: 50 }, () => chat(pw, 'ann')));
    const finalFree = 100_000n - 50n * CHAT_COST;
    const [acct] = await t.db.query(
      `select (a.balance_raw - a.held_raw)::text as free from end_user e join ledger_account a on a.id = e.account_id
        where e.paywall_id = $1 and e.external_id = 'ann'`,
      [pw.id],
    );
    expect(BigInt(acct.free)).toBe(finalFree);
    const events = await lowEvents(pw);
    expect(events).toHaveLength(1);
    const { data, subject } = events[0];
    const user = await endUserId(pw, 'ann');
    expect(data).toEqual({
      paywallId: pw.id,
      ownerUserId: expect.any(String),
      walletUserId: user, // DEFAULT mode: the end user itself, as in the other balance events
      externalUserId: 'ann',
      balance: expect.any(String),
      threshold: '0.08',
    });
    expect(subject).toEqual({ type: 'end_user', id: user, externalId: 'ann' });
    // The balance is one the chats answered (x-paywall-balance), below the threshold.
    const balance = raw(data.balance);
    expect(balance).toBeLessThan(threshold);
    expect(balances).toContain(balance);
    await expectLedgerProven(t.db);
  });

  it('once alerted, more charges below it record nothing and run no check statement', async () => {
    const before = checks;
    await chat(pw, 'ann');
    await charge(pw, 'ann', 1_000n);
    expect(checks).toBe(before);
    expect(await lowEvents(pw)).toHaveLength(1);
  });

  it('a deposit that stays below it does not re-arm it; one back above it does, and 50 concurrent charges record a second event', async () => {
    // 43,614 free: +10,000 stays below 80,000.
    await deposit(t, pw, 'ann', '0.01');
    await charge(pw, 'ann', 1_000n);
    expect(await lowEvents(pw)).toHaveLength(1);
    // Back above: 52,614 + 100,000.
    await deposit(t, pw, 'ann', '0.1');
    const [acct] = await t.db.query(
      `select (a.balance_raw - a.held_raw)::text as free, a.low_alerted_paywalls from end_user e
         join ledger_account a on a.id = e.account_id where e.paywall_id = $1 and e.external_id = 'ann'`,
      [pw.id],
    );
    expect(BigInt(acct.free)).toBe(152_614n);
    expect(acct.low_alerted_paywalls).toEqual([]);
    // 50 manual charges of 0.002 at once: 152,614 → 52,614, crossing 80,000.
    const balances = await Promise.all(Array.from({ length: 50 }, () => charge(pw, 'ann', 2_000n)));
    expect(Math.min(...balances.map(Number))).toBe(52_614);
    const events = await lowEvents(pw);
    expect(events).toHaveLength(2);
    const balance = raw(events[1].data.balance);
    expect(balance).toBeLessThan(threshold);
    expect(balances).toContain(balance);
    expect(events[1].data).toMatchObject({ externalUserId: 'ann', threshold: '0.08' });
    await expectLedgerProven(t.db);
  });

  it('one charge that crosses it: the event carries exactly the balance that charge answered', async () => {
    await deposit(t, pw, 'cat', '0.1');
    expect(await charge(pw, 'cat', 10_000n)).toBe(90_000n); // still above: nothing
    expect((await lowEvents(pw)).filter((e) => e.data.externalUserId === 'cat')).toHaveLength(0);
    expect(await charge(pw, 'cat', 15_000n)).toBe(75_000n);
    await charge(pw, 'cat', 5_000n);
    const cat = (await lowEvents(pw)).filter((e) => e.data.externalUserId === 'cat');
    expect(cat.map((e) => e.data.balance)).toEqual(['0.075']);
  });

  it('a changed threshold starts a new watch: a user alerted under the old one is alerted when crossing the new one', async () => {
    const other = await createProxyPaywall(t, fake);
    await setThreshold(other, '1');
    await deposit(t, other, 'gus', '1');
    await charge(other, 'gus', 100_000n); // 1 → 0.9: crosses 1
    expect((await lowEvents(other)).map((e) => e.data.threshold)).toEqual(['1']);
    await setThreshold(other, '0.5');
    await charge(other, 'gus', 100_000n); // 0.9 → 0.8: above 0.5
    expect(await lowEvents(other)).toHaveLength(1);
    await charge(other, 'gus', 400_000n); // 0.8 → 0.4: crosses 0.5
    const events = await lowEvents(other);
    expect(events.map((e) => [e.data.balance, e.data.threshold])).toEqual([
      ['0.9', '1'],
      ['0.4', '0.5'],
    ]);
    // Raised above the balance: the user is below it already, so no charge crosses it until money lifts it.
    await setThreshold(other, '2');
    await charge(other, 'gus', 100_000n);
    expect(await lowEvents(other)).toHaveLength(2);
    await expectLedgerProven(t.db);
  });

  it('a user first seen below it crosses nothing: no event until money lifted them to it', async () => {
    await deposit(t, pw, 'fay', '0.05'); // below 0.08 from the start
    expect(await charge(pw, 'fay', 10_000n)).toBe(40_000n);
    await chat(pw, 'fay');
    expect((await lowEvents(pw)).filter((e) => e.data.externalUserId === 'fay')).toHaveLength(0);
    await deposit(t, pw, 'fay', '0.1'); // back at or above 0.08: armed
    const answered = await charge(pw, 'fay', 70_000n);
    expect(answered).toBeLessThan(threshold);
    const fay = (await lowEvents(pw)).filter((e) => e.data.externalUserId === 'fay');
    expect(fay.map((e) => raw(e.data.balance))).toEqual([answered]);
    await expectLedgerProven(t.db);
  });

  it('without a threshold: no event and no check statement, however low the balance goes', async () => {
    const plain = await createProxyPaywall(t, fake);
    await deposit(t, plain, 'dan', '0.01');
    const before = checks;
    await Promise.all(Array.from({ length: 5 }, () => chat(plain, 'dan')));
    await charge(plain, 'dan', 4_000n);
    expect(checks).toBe(before);
    expect(await lowEvents(plain)).toHaveLength(0);
    // The same charges with a threshold do check (the counter counts real statements).
    await setThreshold(plain, '1');
    await deposit(t, plain, 'dan', '1');
    await charge(plain, 'dan', 1_000n);
    expect(checks).toBe(before + 1);
    expect(await lowEvents(plain)).toHaveLength(1);
  });
});

describe('paywall.balance.low of a wallet (SHARED)', () => {
  it('a wallet that approves the app below its threshold crosses nothing; one lifted above it then does', async () => {
    const pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    await setThreshold(pw, '0.5');
    const email = 'watch@wallet.test';
    const c = new PageClient(t.url, '198.51.100.78');
    await c.get('/wallet/sign-in');
    expect((await c.post('/wallet/sign-in', { email })).status).toBe(200);
    expect(
      (await c.post('/wallet/sign-in/code', { email, code: await smtp.waitForCode(email) })).status,
    ).toBe(303);
    await c.get('/wallet');
    expect((await c.post('/wallet/topup', { amount: '0.2' })).status).toBe(303);
    // Approve on the consent page (the hosted flow), with 0.2 in the wallet: below 0.5.
    const link = await t.rest('GET', '/v1/user/connect?user=wil', { token: pw.apiKey });
    const url = new URL(link.body.url);
    expect((await c.get(url.pathname + url.search)).status).toBe(200);
    const ok = await c.post(`${url.pathname}/approve`, { request: url.searchParams.get('request')! });
    expect(ok.status).toBe(200);
    expect(await charge(pw, 'wil', 10_000n)).toBe(190_000n);
    expect(await lowEvents(pw)).toHaveLength(0);
    // Money lifts it to 1.19: the charge that takes it below 0.5 is the crossing.
    await c.get('/wallet');
    expect((await c.post('/wallet/topup', { amount: '1' })).status).toBe(303);
    expect(await charge(pw, 'wil', 800_000n)).toBe(390_000n);
    const events = await lowEvents(pw);
    expect(events.map((e) => [e.data.externalUserId, e.data.balance, e.data.threshold])).toEqual([
      ['wil', '0.39', '0.5'],
    ]);
    await expectLedgerProven(t.db);
  });
});

describe("the wallet user's own alert (wallet page, e-mail)", () => {
  let pw: ProxyPaywall;
  const email = 'low@wallet.test';
  const c = new PageClient('', '198.51.100.77');
  let wallet: { walletUserId: string; accountId: string };

  beforeAll(async () => {
    (c as any).base = t.url;
    pw = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    // Sign in on the hosted pages (the wallet user is created at first sign-in).
    await c.get('/wallet/sign-in');
    expect((await c.post('/wallet/sign-in', { email })).status).toBe(200);
    const code = await smtp.waitForCode(email);
    expect((await c.post('/wallet/sign-in/code', { email, code })).status).toBe(303);
    const [w] = await t.db.query(`select id, account_id from wallet_user where email = $1`, [email]);
    wallet = { walletUserId: w.id, accountId: w.account_id };
    await t.rest('GET', '/v1/user/connect?user=eve', { token: pw.apiKey });
    await connectEndUser(t.db, pw.id, 'eve', wallet);
    await c.get('/wallet');
    expect((await c.post('/wallet/topup', { amount: '0.1' })).status).toBe(303);
  });

  const lowMails = () =>
    smtp.messages.filter((m) => m.to.includes(email) && m.subject === LOW_BALANCE_SUBJECT);

  it('the wallet page has the form: input lowBalanceAlert, button "Save alert"; saving shows the value', async () => {
    const page = await c.get('/wallet');
    expect(page.status).toBe(200);
    expect(page.html).toMatch(/<form method="post" action="\/wallet\/alert">/);
    expect(page.html).toMatch(/<label for="lowBalanceAlert">[^<]+<\/label>/);
    expect(page.html).toMatch(/<input id="lowBalanceAlert" name="lowBalanceAlert"/);
    expect(page.html).toContain('<button type="submit">Save alert</button>');
    // Without the CSRF token nothing is saved.
    expect((await c.post('/wallet/alert', { lowBalanceAlert: '0.08' }, null)).status).toBe(403);
    // A value that is not an amount: 400, the message, and what was typed.
    const bad = await c.post('/wallet/alert', { lowBalanceAlert: 'lots' });
    expect(bad.status).toBe(400);
    expect(bad.html).toContain('Enter the alert in USDC');
    expect(bad.html).toMatch(/name="lowBalanceAlert"[^>]*value="lots"/);
    // A whole amount comes back as typed: the field said "1" for an alert of 100 (trailing zeros were
    // stripped from "100"), so saving the form again would have set the alert to 1 USDC.
    for (const typed of ['100', '2.5', '0.08']) {
      expect((await c.post('/wallet/alert', { lowBalanceAlert: typed })).status).toBe(303);
      const shown = await c.get('/wallet');
      expect(shown.html).toMatch(
        new RegExp(`name="lowBalanceAlert"[^>]*value="${typed.replace('.', '\\.')}"`),
      );
    }
    expect((await c.get('/wallet')).html).not.toContain('below 100.00 USDC');
    const saved = await c.post('/wallet/alert', { lowBalanceAlert: '0.08' });
    expect(saved.status).toBe(303);
    expect(saved.location).toBe('/wallet?done=alert_saved');
    const after = await c.get('/wallet?done=alert_saved');
    expect(after.html).toContain('Your low-balance alert was saved.');
    expect(after.html).toMatch(/name="lowBalanceAlert"[^>]*value="0.08"/);
    expect(after.html).toContain('below 0.08 USDC');
    const [a] = await t.db.query(`select low_alert_raw::text as v from ledger_account where id = $1`, [
      wallet.accountId,
    ]);
    expect(a.v).toBe('80000');
  });

  it('50 concurrent chats crossing it send exactly one e-mail whose subject says the balance is low', async () => {
    await Promise.all(Array.from({ length: 50 }, () => chat(pw, 'eve')));
    const mail = await smtp.waitForMessage(email);
    expect(mail.subject).toBe('Your Paywall Proxy balance is low');
    expect(mail.text).toContain('below the alert you set at 0.08 USDC');
    // Amounts in e-mails are written as on the pages (usdcText): "0.079891 USDC", never "0.0799" or "0.080000".
    const [, balance] = /balance is (\S+ USDC), below/.exec(mail.text)!;
    expect(balance).toMatch(/^\d+\.(\d{2}|\d{3,5}[1-9]|\d{6}) USDC$/);
    expect(balance).not.toMatch(/\.\d{3,}0 USDC$/);
    expect(mail.text).toContain(`${t.url}/wallet/topup`);
    await t.app.services.mailer.idle(); // every e-mail the chats caused has reached the catcher
    expect(lowMails()).toHaveLength(1);
    // The paywall has no threshold of its own: no event.
    expect(await lowEvents(pw)).toHaveLength(0);
  });

  it('test funds back above it re-arm it: the next crossing sends a second e-mail', async () => {
    await c.get('/wallet');
    expect((await c.post('/wallet/topup', { amount: '0.1' })).status).toBe(303);
    // 45,700 + 100,000 = 145,700; 40 chats at once: → 102,260 (above); then 25 more: → 75,110 (below).
    await Promise.all(Array.from({ length: 40 }, () => chat(pw, 'eve')));
    expect(lowMails()).toHaveLength(1);
    await Promise.all(Array.from({ length: 25 }, () => chat(pw, 'eve')));
    await t.app.services.mailer.idle();
    expect(lowMails()).toHaveLength(2);
  });

  it('set while the balance is already below it: no e-mail until it was above again; empty turns it off', async () => {
    // 75,110 free; an alert at 1 USDC is already crossed.
    expect((await c.post('/wallet/alert', { lowBalanceAlert: '1' })).status).toBe(303);
    await chat(pw, 'eve');
    await t.app.services.mailer.idle();
    expect(lowMails()).toHaveLength(2);
    await c.get('/wallet');
    const off = await c.post('/wallet/alert', { lowBalanceAlert: '' });
    expect(off.location).toBe('/wallet?done=alert_off');
    const [a] = await t.db.query(`select low_alert_raw, low_alerted from ledger_account where id = $1`, [
      wallet.accountId,
    ]);
    expect(a).toEqual({ low_alert_raw: null, low_alerted: false });
    await expectLedgerProven(t.db);
  });

  it('in a browser: type an amount, Save alert, and the page says it is saved and shows it', async () => {
    const browser = await launchBrowser();
    try {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      // The signed-in session of the page client above.
      await context.addCookies([...c.cookies].map(([name, value]) => ({ name, value, url: t.url })));
      const page = await context.newPage();
      await page.goto(`${t.url}/wallet`);
      await page.getByLabel('Alert below').fill('2.5');
      await page.getByRole('button', { name: 'Save alert' }).click();
      await page.waitForURL(/done=alert_saved/);
      await page.getByText('Your low-balance alert was saved.').waitFor();
      expect(await page.getByLabel('Alert below').inputValue()).toBe('2.5');
      await screenshot(page, 'wallet-low-balance-alert');
      const [a] = await t.db.query(`select low_alert_raw::text as v from ledger_account where id = $1`, [
        wallet.accountId,
      ]);
      expect(a.v).toBe('2500000');
    } finally {
      await browser.close();
    }
  });
});
