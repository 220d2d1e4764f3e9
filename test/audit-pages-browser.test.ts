import { existsSync } from 'node:fs';
import { execSync } from 'node:child_process';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { launchBrowser, screenshot } from './helpers/browser.js';
import { FakeStripe } from './helpers/fake-stripe.js';
import { FakeUpstream } from './helpers/fake-upstream.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';
import { client, createProxyPaywall, deposit, MODEL, type ProxyPaywall } from './helpers/proxy-setup.js';
import { DASHBOARD_DIR } from '../src/pages/dashboard.router.js';

/**
 * What an end user and a developer see, driven from outside in Chromium: the wallet's notices after a
 * redirect, a DEFAULT app's top-up page opened with a wallet session or without its `user`, and the
 * dashboard's text contrast (WCAG AA, 4.5:1 for small text).
 */
let t: TestApp;
let stripe: FakeStripe;
let fake: FakeUpstream;
let smtp: SmtpCatcher;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let shop: { id: string; apiKey: string };
let pw: ProxyPaywall;

const EMAIL = 'quinn@example.com';

beforeAll(async () => {
  if (!existsSync(`${DASHBOARD_DIR}/index.html`)) execSync('npm run build:dashboard', { stdio: 'inherit' });
  smtp = await startSmtpCatcher();
  stripe = await new FakeStripe().start();
  fake = await FakeUpstream.start();
  t = await startTestApp({
    SMTP_URL: smtp.url,
    STRIPE_API_BASE: stripe.url,
    // The platform's Stripe: the wallet's top-up page offers card payments (and auto top-up) too.
    STRIPE_SECRET_KEY: 'sk_test_platform_audit_pages',
    STRIPE_WEBHOOK_SECRET: 'whsec_audit_pages_0000',
    WALLET_TEST_FUNDS: 'true',
  });
  shop = await t.createPaywall('DEFAULT', 'Cobalt Chat');
  const r = await t.gql(
    t.ownerToken,
    `mutation($i: ConnectStripeInput!) { connectStripe(input: $i) { id } }`,
    {
      i: { paywallId: shop.id, secretKey: 'sk_test_audit_key_0123456789' },
    },
  );
  expect(r.errors).toBeUndefined();
  // Usage for the dashboard's overview: its charts (and their legends) show only with data.
  pw = await createProxyPaywall(t, fake, { mode: 'DEFAULT' });
  await deposit(t, pw, 'ann', '1');
  await client(t, pw, 'ann').chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Hi' }],
  });
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  // Signed in to the wallet, as someone who uses SHARED apps and DEFAULT ones.
  await page.goto(`${t.url}/wallet/sign-in`);
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByRole('button', { name: 'Send code' }).click();
  await page.getByLabel('Code').fill(await smtp.waitForCode(EMAIL));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Your wallet' }).waitFor();
}, 120_000);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await fake?.close();
  await stripe?.stop();
  await smtp?.close();
});

describe('the wallet page after a redirect', () => {
  it('a canceled card payment is a neutral notice, not a green success', async () => {
    await page.goto(`${t.url}/wallet?done=card_canceled`);
    const notice = page.locator('main .alert');
    expect(await notice.innerText()).toBe('The payment was canceled; nothing was charged.');
    // It was "alert ok" (the success green of "Test funds were added"): nothing was done.
    expect(await notice.getAttribute('class')).toBe('alert info');
    await page.goto(`${t.url}/wallet?done=funds`);
    expect(await page.locator('main .alert').getAttribute('class')).toBe('alert ok');
  });

  it('a `done` that names no notice shows none (no empty box for ?done=toString)', async () => {
    for (const done of ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'nothing']) {
      await page.goto(`${t.url}/wallet?done=${done}`);
      await page.getByRole('heading', { name: 'Your wallet' }).waitFor();
      // An inherited property of the notice table was taken for a notice: an empty green box.
      expect([done, await page.locator('main .alert').count()]).toEqual([done, 0]);
    }
  });
});

describe("a DEFAULT app's top-up page", () => {
  it('with a wallet session, the header does not show the wallet e-mail (the page is about the app account)', async () => {
    await page.goto(`${t.url}/topup/${shop.id}?user=bob`);
    expect(await page.locator('p.lead').innerText()).toBe('For the account bob on Cobalt Chat.');
    // It said "quinn@example.com  Sign out" above "For the account bob": whose money is this?
    expect(await page.locator('header.top').innerText()).not.toContain(EMAIL);
    expect(await page.locator('header.top').innerText()).toBe('P\nPaywall Proxy');
    await screenshot(page, 'audit-default-topup-signed-in');
  });

  it('without `user`, it says the link names no account; it does not claim the app has no top-up page', async () => {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 844 });
      const res = await page.goto(`${t.url}/topup/${shop.id}`);
      expect(res!.status()).toBe(200);
      const text = await page.locator('main').innerText();
      // It said "Cobalt Chat credits balances itself and has not set up an online top-up page yet",
      // though Stripe is connected and the user's own link works.
      expect(text).not.toContain('has not set up');
      expect(await page.getByRole('alert').innerText()).toBe(
        'This top-up link does not say which account to top up. Open the top-up link Cobalt Chat gave you (in its "balance too low" reply or its Top up button) again.',
      );
      expect(await page.getByRole('button', { name: /^Pay / }).count()).toBe(0);
      await screenshot(
        page,
        width === 390 ? 'audit-default-topup-no-user-phone' : 'audit-default-topup-no-user',
      );
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });
});

describe('signing in from a connect link', () => {
  it('the sign-in page says which app asks to connect, before anyone signs in', async () => {
    const shared = await createProxyPaywall(t, fake, { mode: 'SHARED' });
    await t.gql(t.ownerToken, `mutation($i: UpdatePaywallInput!) { updatePaywall(input: $i) { id } }`, {
      i: { paywallId: shared.id, name: 'Inkwell Writer' },
    });
    const link = await t.rest('GET', '/v1/user/connect?user=zed', { token: shared.apiKey });
    expect(link.body.connected).toBe(false);
    const fresh = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const p = await fresh.newPage();
    await p.goto(link.body.url);
    await p.getByLabel('Email').waitFor();
    expect(p.url()).toContain('/wallet/sign-in?next=');
    // It said only "Sign in to your wallet": nothing about the app whose link was just followed.
    expect(await p.getByRole('status').innerText()).toBe(
      'Inkwell Writer asks to connect to your wallet. Sign in to see what it asks for: nothing is connected until you approve.',
    );
    await screenshot(p, 'audit-sign-in-for-app-phone');
    // A sign-in page whose `next` is no pending connect link names no app (a crafted link cannot pick one).
    for (const next of [
      `/connect/${shared.id}?request=00000000-0000-4000-8000-000000000000`,
      `/connect/${shop.id}?request=${new URL(link.body.url).searchParams.get('request')}`,
      '/wallet',
    ]) {
      await p.goto(`${t.url}/wallet/sign-in?next=${encodeURIComponent(next)}`);
      await p.getByLabel('Email').waitFor();
      expect([next, await p.getByRole('status').count()]).toEqual([next, 0]);
    }
    await fresh.close();
  });
});

describe('a refused auto top-up field', () => {
  it("is marked invalid and names the message, on the wallet's and a DEFAULT app's top-up page", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [path, prefix] of [
      ['/wallet/topup', 'wallet-auto'],
      [`/topup/${shop.id}?user=bob`, 'auto'],
    ]) {
      await page.goto(`${t.url}${path}`);
      await page.getByLabel('Top up automatically').check();
      await page.getByLabel('at most per month').fill('3');
      await page.getByRole('button', { name: 'Pay 5 USD' }).click();
      const message = page.locator('#topup-error');
      // It said "(5) and at most 100000", without the currency; the field itself was not marked.
      expect(await message.innerText()).toBe(
        'The monthly limit must be a USD amount of at least 5 USD (the amount added) and at most 100,000 USD.',
      );
      const cap = page.locator(`#${prefix}-cap`);
      expect([path, await cap.getAttribute('aria-invalid')]).toEqual([path, 'true']);
      expect(await cap.getAttribute('aria-describedby')).toBe(`topup-error ${prefix}-cap-hint`);
      expect(await cap.inputValue()).toBe('3');
      // The other fields are not blamed.
      expect(await page.locator(`#${prefix}-threshold`).getAttribute('aria-invalid')).toBeNull();
      await screenshot(page, `audit-autotopup-refused-${prefix}-phone`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });
});

/** The contrast ratio of the text of every element that has its own text, against its nearest background. */
async function lowContrast(p: Page): Promise<string[]> {
  return p.evaluate(() => {
    const rgb = (c: string) => (c.match(/[\d.]+/g) ?? []).slice(0, 4).map(Number);
    const lum = (c: number[]) => {
      const [r, g, b] = c.slice(0, 3).map((v) => {
        const s = v / 255;
        return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const out: string[] = [];
    for (const el of Array.from(document.querySelectorAll('body *'))) {
      const own = Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent!.trim());
      if (!own || (el as HTMLElement).offsetParent === null) continue;
      const cs = getComputedStyle(el);
      if (cs.visibility === 'hidden' || Number(cs.opacity) === 0) continue;
      let bg = [255, 255, 255];
      for (let e: Element | null = el; e; e = e.parentElement) {
        const c = rgb(getComputedStyle(e).backgroundColor);
        if (c.length === 3 || (c.length === 4 && c[3] > 0)) {
          bg = c;
          break;
        }
      }
      const fg = rgb(el instanceof SVGElement ? cs.fill : cs.color);
      const [a, b] = [lum(fg), lum(bg)];
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      // Disabled controls are exempt (WCAG 1.4.3).
      if (ratio < 4.5 && !(el as HTMLButtonElement).disabled)
        out.push(
          `${ratio.toFixed(2)} "${el.textContent!.trim().slice(0, 40)}" ${cs.color} on rgb(${bg.join(',')})`,
        );
    }
    return [...new Set(out)];
  });
}

describe('the dashboard', () => {
  it('every text reads at 4.5:1 or more: muted hints, the sidebar label, chart legends and axes', async () => {
    const dash = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const p = await dash.newPage();
    await p.goto(`${t.url}/dashboard`);
    await p.getByLabel('Token').fill(t.ownerToken);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { name: 'Paywalls', level: 1 }).waitFor();
    const found: Record<string, string[]> = {};
    found.paywalls = await lowContrast(p);
    for (const view of ['overview', 'users', 'settings', 'models', 'webhooks']) {
      await p.goto(`${t.url}/dashboard/p/${pw.id}/${view}`);
      await p.locator('main h1').waitFor();
      if (view === 'overview') await p.locator('.recharts-legend-item').first().waitFor();
      else await p.waitForLoadState('networkidle');
      found[view] = await lowContrast(p);
      if (view === 'overview') await screenshot(p, 'audit-dashboard-overview-contrast');
    }
    // A DEFAULT paywall has no consent page: its settings said the description was "Shown to wallet users
    // on the consent page".
    await p.goto(`${t.url}/dashboard/p/${pw.id}/settings`);
    const hint = p.locator('.field', { has: p.getByLabel('Description', { exact: true }) }).locator('.hint');
    expect(await hint.innerText()).toBe(
      'For your own reference: DEFAULT mode has no consent page, end users do not see it.',
    );
    // The hint is the field's accessible description (it was a loose <small> a screen reader skipped).
    const description = p.getByLabel('Description', { exact: true });
    expect(await description.getAttribute('aria-describedby')).toBe(await hint.getAttribute('id'));
    expect(await hint.getAttribute('id')).toBeTruthy();
    // Muted text was #7a8394 (3.6:1 on the page), the sidebar's "Paywall" label 2.3:1, and the legends
    // wrote "Provider cost" in orange (2.4:1) and "Margin" in green (2.6:1).
    expect(found).toEqual({ paywalls: [], overview: [], users: [], settings: [], models: [], webhooks: [] });
    await dash.close();
  });
});
