import { FakeUpstream } from './helpers/fake-upstream.js';
import { startTestApp, type TestApp } from './helpers/app.js';

/**
 * docs/reference.md §1 "Provider targets": connectProvider accepts, and the proxy connects to, only http(s) URLs
 * whose host resolves to public addresses, unless PROVIDER_ALLOW_PRIVATE_NETWORKS=true (self-hosted models).
 * Found by a hostile probe: a loopback "provider" answered with an internal service's JSON.
 */
let strict: TestApp;
let internal: FakeUpstream;
beforeAll(async () => {
  internal = await FakeUpstream.start();
  strict = await startTestApp({ PROVIDER_ALLOW_PRIVATE_NETWORKS: 'false' });
});
afterAll(async () => {
  await strict?.close();
  await internal?.close();
});

const CONNECT = `mutation($i: ConnectProviderInput!) { connectProvider(input: $i) { provider { baseUrl } } }`;

describe('provider targets', () => {
  it('refuses loopback, private, link-local, metadata and local names, naming the setting', async () => {
    const pw = await strict.createPaywall();
    for (const baseUrl of [
      internal.baseUrl,
      'http://127.0.0.1:11434/v1',
      'http://localhost:8000/v1',
      'http://10.1.2.3/v1',
      'http://192.168.0.10:8080/v1',
      'http://169.254.169.254/latest',
      'http://[::1]:8080/v1',
      'http://2130706433/v1',
      'http://metadata.google.internal/v1',
    ]) {
      const r = await strict.gql(pw.apiKey, CONNECT, { i: { baseUrl, apiKey: 'sk-internal-0123456789' } });
      expect({ baseUrl, ext: r.errors?.[0].extensions }).toMatchObject({
        baseUrl,
        ext: { code: 'BAD_USER_INPUT', param: 'baseUrl', errorCode: 'forbidden_base_url' },
      });
      expect(r.errors?.[0].message).toMatch(/PROVIDER_ALLOW_PRIVATE_NETWORKS=true/);
    }
    const p = await strict.gql(pw.apiKey, `{ paywall { provider { baseUrl } } }`);
    expect(p.data.paywall.provider).toBeNull();
    expect(internal.requests).toHaveLength(0);
  });

  it('a provider stored before the rule (or re-pointed by DNS) is refused at connect time, and nothing is charged', async () => {
    const pw = await strict.createPaywall();
    // Written directly, as an older version (or a host whose DNS now answers a private address) would have it.
    await strict.db.query(
      `insert into provider (paywall_id, base_url, api_key_ciphertext, api_key_last_four)
       values ($1, $2, $3, '6789')`,
      [
        pw.id,
        internal.baseUrl,
        strict.app.services.providers['box']().encrypt('sk-internal-0123456789', pw.id),
      ],
    );
    const price = await strict.gql(
      pw.apiKey,
      `mutation { setModelPricing(input: {modelId: "m", prompt: "0.000001", completion: "0.000001"}) { id } }`,
    );
    expect(price.errors).toBeUndefined();
    await strict.rest('POST', '/v1/user/balance/deposit', {
      token: pw.apiKey,
      body: { user: 'u', amount: '1' },
    });
    const r = await strict.rest('POST', '/v1/chat/completions', {
      token: pw.apiKey,
      body: { model: 'm', user: 'u', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(r.status).toBe(502);
    expect(r.body.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    // The cause, without the app's address (the operator's log names the setting).
    expect(r.body.error.message).toBe('The model provider failed: its address is not a public one');
    expect(r.body.error.message).not.toContain('127.0.0.1');
    expect(internal.requests).toHaveLength(0);
    const bal = await strict.rest('GET', '/v1/user/balance?user=u', { token: pw.apiKey });
    expect(bal.body.balance).toBe('1000000');
  });

  it('public hosts are accepted', async () => {
    const pw = await strict.createPaywall();
    const r = await strict.gql(pw.apiKey, CONNECT, {
      i: { baseUrl: 'https://93.184.215.14/v1', apiKey: 'sk-public-0123456789' },
    });
    expect(r.errors).toBeUndefined();
    expect(r.data.connectProvider.provider.baseUrl).toBe('https://93.184.215.14/v1');
  });
});
