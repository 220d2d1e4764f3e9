import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestApp, type TestApp } from './helpers/app.js';
import { launchBrowser, screenshot } from './helpers/browser.js';
import { startSmtpCatcher, type SmtpCatcher } from './helpers/smtp-catcher.js';

/**
 * The frame every hosted page shares (docs/wallet.md "The pages"), in Chromium at 1280 and 390 px: the
 * header lines up with the content, a wrong address is a page with a way back (not "Cannot GET"), every
 * page names itself in the tab, and a control reached with the keyboard shows its focus ring.
 */
let t: TestApp;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let smtp: SmtpCatcher;

beforeAll(async () => {
  smtp = await startSmtpCatcher();
  t = await startTestApp({ WALLET_TEST_FUNDS: 'true', SMTP_URL: smtp.url });
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 }, javaScriptEnabled: false });
  page = await context.newPage();
}, 120_000);
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.close();
  await smtp?.close();
});

const left = async (selector: string) => (await page.locator(selector).first().boundingBox())!.x;

it('at 1280 px the header of a narrow page (sign-in, messages) lines up with its content', async () => {
  for (const path of ['/wallet/sign-in', '/wallet/nothing-here']) {
    await page.goto(`${t.url}${path}`);
    // It sat 128 px left of the heading: the header was as wide as the wallet page's, the content narrower.
    expect([path, await left('header.top .brand')]).toEqual([path, await left('main h1')]);
  }
  await page.goto(`${t.url}/wallet/sign-in`);
  await screenshot(page, 'sign-in-wide');
});

it('a wrong address is a page that says so, with a way back, at 1280 and 390 px', async () => {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 844 });
    const res = await page.goto(`${t.url}/wallet/nothing-here`);
    expect(res!.status()).toBe(404);
    expect(await page.title()).toBe('Page not found · Paywall Proxy');
    expect(await page.locator('main h1').innerText()).toBe('Page not found');
    expect(await page.getByRole('alert').innerText()).toBe(
      'There is no page at this address. Check the link you followed, or open your wallet.',
    );
    expect(await page.getByRole('link', { name: 'Go to your wallet' }).getAttribute('href')).toBe('/wallet');
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
    await screenshot(page, width === 390 ? 'page-not-found-phone' : 'page-not-found');
  }
  await page.setViewportSize({ width: 1280, height: 900 });
});

it('every page names itself in the tab; the keyboard shows where it is (3px ring)', async () => {
  const pw = await t.createPaywall('SHARED', 'Inkwell Writer');
  const link = await t.rest('GET', '/v1/user/connect?user=ada', { token: pw.apiKey });
  const titles: string[] = [];
  for (const url of [
    link.body.url,
    `${t.url}/wallet`,
    `${t.url}/connect/${pw.id}?request=nope`,
    `${t.url}/topup/x`,
  ]) {
    await page.goto(url);
    titles.push(await page.title());
  }
  expect(titles).toEqual([
    'Sign in · Paywall Proxy',
    'Sign in · Paywall Proxy', // /wallet signed out: the sign-in page
    'Link not valid · Paywall Proxy',
    'Link not found · Paywall Proxy',
  ]);
  await page.goto(`${t.url}/wallet/sign-in`);
  // From the e-mail field, Tab reaches the button.
  await page.getByLabel('Email').focus();
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => {
    const el = document.activeElement as HTMLElement;
    const s = getComputedStyle(el);
    return { text: el.textContent, outline: `${s.outlineStyle} ${s.outlineWidth}` };
  });
  expect(focused).toEqual({ text: 'Send code', outline: 'solid 3px' });
  await screenshot(page, 'sign-in-focus');
});

it('at 390 px a long app name, account id and e-mail address wrap inside the page instead of widening it', async () => {
  const name = 'SupercalifragilisticexpialidociousWritingAssistantPro';
  const pw = await t.createPaywall('SHARED', name);
  const user = 'user-with-a-rather-long-external-identifier-0123456789abcdef';
  const email = 'someone.with.a.very.long.name.0123456789@subdomain.example-company.com';
  await page.setViewportSize({ width: 390, height: 844 });
  const link = await t.rest('GET', `/v1/user/connect?user=${user}`, { token: pw.apiKey });
  const width = () => page.evaluate(() => document.documentElement.scrollWidth);
  await page.goto(link.body.url);
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Send code' }).click();
  // The code page names the address: it was 664 px wide.
  expect(await width()).toBeLessThanOrEqual(390);
  await page.getByLabel('Code').fill(await smtp.waitForCode(email));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Approve' }).waitFor();
  // The consent page: 768 px wide, the heading and the header's address ran off the screen.
  expect(await width()).toBeLessThanOrEqual(390);
  const signOut = (await page.getByRole('button', { name: 'Sign out' }).boundingBox())!;
  expect(signOut.height).toBeLessThan(40); // one line (31 px), not "Si / gn / ou / t" (100 px)
  await screenshot(page, 'consent-long-names-phone');
  await page.getByRole('button', { name: 'Approve' }).click();
  expect(await width()).toBeLessThanOrEqual(390);
  await page.goto(`${t.url}/wallet`);
  expect(await width()).toBeLessThanOrEqual(390);
  await screenshot(page, 'wallet-long-names-phone');
  await page.setViewportSize({ width: 1280, height: 900 });
});
