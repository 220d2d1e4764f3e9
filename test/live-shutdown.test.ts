import { startTestApp } from './helpers/app.js';
import { liveClient, LiveSubscription } from './helpers/live-client.js';

/**
 * A graceful stop (SIGTERM) with live subscribers connected. Their sockets are upgraded, not HTTP
 * connections: the HTTP server's own draining never closes them, and one left open used to keep the stop
 * (and the process) waiting for ever.
 */
test('stopping with a live subscriber connected tells it to go (1001) and completes without waiting out the grace', async () => {
  const t = await startTestApp();
  const pw = await t.createPaywall();
  const ws = liveClient(t.url, pw.apiKey);
  const closes: number[] = [];
  ws.on('closed', (e) => closes.push((e as { code: number }).code));
  const sub = new LiveSubscription(ws, { types: ['paywall.balance.deposit.created'] });
  try {
    // Subscribed for sure: an event made now arrives.
    for (let i = 0; sub.events.length === 0; i++) {
      expect(i).toBeLessThan(100);
      await t.rest('POST', '/v1/user/balance/deposit', {
        token: pw.apiKey,
        body: { user: 'ann', amount: '1' },
      });
      await new Promise((r) => setTimeout(r, 100));
    }
    // A grace far longer than the test's timeout: the stop must not need it.
    await t.app.stop(10 * 60_000);
    expect(closes).toEqual([1001]);
    expect(sub.errors.map((e) => e.code)).toEqual([1001]);
  } finally {
    await ws.dispose();
    await t.close();
  }
});
