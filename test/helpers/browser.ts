import { execSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';
export const SCREENSHOT_DIR = fileURLToPath(new URL('../screenshots/', import.meta.url));

/**
 * Debian's Chromium, driven by playwright-core (no browser download from the registry). When it is
 * missing it is installed first (tests run as root on CI machines); the browser tests never skip.
 * The flags keep Chromium from calling home on this closed network.
 */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH))
    execSync('apt-get update && apt-get install -y chromium', { stdio: 'inherit' });
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
}

/** A full-page screenshot under test/screenshots/ (git-ignored), to look at. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = `${SCREENSHOT_DIR}${name}.png`;
  await page.screenshot({ path, fullPage: true });
  return path;
}
