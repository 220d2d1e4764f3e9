import { allowanceText, keyLimitText, rateLimitedText } from '../src/modules/proxy/blocked-reply.js';

/**
 * The texts of limit replies are assistant messages people read in a chat: when the limit resets is written
 * as a date and a time ("30 Nov 2026 at 00:00 UTC"), and the amount as the wallet page writes it
 * ("0.50 USDC"). The instant for code stays in `paywall.resetsAt`.
 */
const MONDAY = new Date('2026-11-30T00:00:00.000Z');
const ISO = /\d{4}-\d{2}-\d{2}T/;

describe('limit reply texts', () => {
  it("an app's allowance: the limit as the wallet shows it, the reset as a date", () => {
    const text = allowanceText(500_000n, 'week', MONDAY, 'https://pay.example/wallet');
    // It read "… of 0.5 USDC per week … It resets at 2026-11-30T00:00:00.000Z (UTC). …".
    expect(text).toBe(
      'This app has reached the spending limit of 0.50 USDC per week set in your wallet. It resets on 30 Nov 2026 at 00:00 UTC. To keep going now, raise the limit in your wallet: https://pay.example/wallet',
    );
    expect(allowanceText(1_234_500n, 'total', null, 'https://pay.example/wallet')).toBe(
      'This app has reached the spending limit of 1.2345 USDC in total set in your wallet. To keep going now, raise the limit in your wallet: https://pay.example/wallet',
    );
  });

  it("a key's limit", () => {
    expect(keyLimitText(10_000n, 'day', MONDAY)).toBe(
      'This key has reached its spending limit of 0.01 USDC per day. It resets on 30 Nov 2026 at 00:00 UTC; please try again then.',
    );
    expect(keyLimitText(2_000_000n, 'total', null)).toBe(
      'This key has reached its spending limit of 2.00 USDC in total. Ask the app for a new key or a higher limit.',
    );
  });

  it('a daily limit', () => {
    const text = rateLimitedText('3 requests per day', MONDAY);
    expect(text).toBe(
      "You have reached today's limit of 3 requests per day for this app. It resets on 30 Nov 2026 at 00:00 UTC; please try again then.",
    );
    expect(text).not.toMatch(ISO);
  });
});
