import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LookupAddress } from 'node:dns';
import { request, type Dispatcher } from 'undici';
import {
  UrlGuardError,
  createGuardedDispatcher,
  isForbiddenAddress,
  validateWebhookUrl,
  type HostLookup,
  type UrlGuardReason,
} from '../src/shared/url-guard.js';

const v4 = (address: string): LookupAddress => ({ address, family: 4 });
const v6 = (address: string): LookupAddress => ({ address, family: 6 });

/** Fake DNS: the names the table uses, and nothing else (no test touches real DNS for validation). */
const FAKE_DNS: Record<string, LookupAddress[]> = {
  'evil.example': [v4('10.0.0.5')],
  'mixed.example': [v4('93.184.216.34'), v4('10.0.0.5')],
  'mixed6.example': [v6('2606:4700::1111'), v6('fd00::1')],
  'metadata.example': [v4('169.254.169.254')],
  'mapped.example': [v6('::ffff:127.0.0.1')],
  'empty.example': [],
  'hooks.example': [v4('93.184.216.34'), v6('2606:4700::1111')],
};
const fakeLookup: HostLookup = async (hostname) => {
  const answer = FAKE_DNS[hostname];
  if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return answer;
};

async function reasonFor(url: string, allowPrivate = false): Promise<UrlGuardReason | 'accepted'> {
  try {
    await validateWebhookUrl(url, { allowPrivate, lookup: fakeLookup });
    return 'accepted';
  } catch (err) {
    if (err instanceof UrlGuardError) return err.reason;
    throw err;
  }
}

describe('validateWebhookUrl rejects hostile targets (allowPrivate=false)', () => {
  const hostile: Array<[string, UrlGuardReason]> = [
    // loopback
    ['https://127.0.0.1/', 'forbidden_address'],
    ['https://127.1/', 'forbidden_address'],
    ['https://127.255.255.254/', 'forbidden_address'],
    ['https://127.0.0.1./', 'forbidden_address'],
    ['https://localhost/', 'forbidden_host'],
    ['https://LOCALHOST./', 'forbidden_host'],
    ['https://foo.localhost/', 'forbidden_host'],
    ['https://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/', 'forbidden_host'], // IDNA maps full-width letters to "localhost"
    // "this host"
    ['https://0.0.0.0/', 'forbidden_address'],
    ['https://0/', 'forbidden_address'],
    // private
    ['https://10.0.0.1/', 'forbidden_address'],
    ['https://10.255.255.255/', 'forbidden_address'],
    ['https://172.16.0.1/', 'forbidden_address'],
    ['https://172.31.255.254/', 'forbidden_address'],
    ['https://192.168.1.1/', 'forbidden_address'],
    // link-local and cloud metadata
    ['https://169.254.169.254/latest/meta-data/', 'forbidden_address'],
    ['https://169.254.0.1/', 'forbidden_address'],
    ['https://metadata.google.internal/computeMetadata/v1/', 'forbidden_host'],
    ['https://db.internal/', 'forbidden_host'],
    // CGNAT
    ['https://100.64.0.1/', 'forbidden_address'],
    ['https://100.127.255.255/', 'forbidden_address'],
    // special-purpose IPv4
    ['https://192.0.0.1/', 'forbidden_address'],
    ['https://192.0.2.1/', 'forbidden_address'],
    ['https://198.18.0.1/', 'forbidden_address'],
    ['https://203.0.113.7/', 'forbidden_address'],
    ['https://224.0.0.1/', 'forbidden_address'],
    ['https://239.255.255.250/', 'forbidden_address'],
    ['https://240.0.0.1/', 'forbidden_address'],
    ['https://255.255.255.255/', 'forbidden_address'],
    // IPv6
    ['https://[::1]/', 'forbidden_address'],
    ['https://[::]/', 'forbidden_address'],
    ['https://[fc00::1]/', 'forbidden_address'],
    ['https://[fd12:3456::1]/', 'forbidden_address'],
    ['https://[fe80::1]/', 'forbidden_address'],
    ['https://[fec0::1]/', 'forbidden_address'],
    ['https://[ff02::1]/', 'forbidden_address'],
    ['https://[2001:db8::1]/', 'forbidden_address'],
    ['https://[100::1]/', 'forbidden_address'],
    // IPv6 forms that embed a forbidden IPv4 address
    ['https://[::ffff:127.0.0.1]/', 'forbidden_address'],
    ['https://[::ffff:7f00:1]/', 'forbidden_address'],
    ['https://[::ffff:10.0.0.1]/', 'forbidden_address'],
    ['https://[::ffff:169.254.169.254]/', 'forbidden_address'],
    ['https://[::ffff:a9fe:a9fe]/', 'forbidden_address'],
    ['https://[64:ff9b::7f00:1]/', 'forbidden_address'],
    ['https://[64:ff9b::10.0.0.1]/', 'forbidden_address'],
    ['https://[::127.0.0.1]/', 'forbidden_address'],
    ['https://[2002:7f00:1::1]/', 'forbidden_address'],
    // odd IPv4 spellings that the URL parser normalises
    ['https://2130706433/', 'forbidden_address'],
    ['http://2130706433/', 'unsupported_scheme'],
    ['https://0177.0.0.1/', 'forbidden_address'],
    ['https://0x7f000001/', 'forbidden_address'],
    ['https://0x7f.1/', 'forbidden_address'],
    ['https://0x7f.0x0.0x0.0x1/', 'forbidden_address'],
    ['https://%31%32%37.0.0.1/', 'forbidden_address'],
    // names that resolve to forbidden addresses
    ['https://evil.example/hook', 'forbidden_address'],
    ['https://mixed.example/', 'forbidden_address'],
    ['https://mixed6.example/', 'forbidden_address'],
    ['https://metadata.example/', 'forbidden_address'],
    ['https://mapped.example/', 'forbidden_address'],
    ['https://empty.example/', 'unresolvable_host'],
    ['https://nxdomain.example/', 'unresolvable_host'],
    // schemes
    ['http://93.184.216.34/', 'unsupported_scheme'],
    ['ftp://93.184.216.34/', 'unsupported_scheme'],
    ['file:///etc/passwd', 'unsupported_scheme'],
    ['gopher://127.0.0.1:6379/_FLUSHALL', 'unsupported_scheme'],
    ['javascript:alert(1)', 'unsupported_scheme'],
    // credentials
    ['https://user:pass@93.184.216.34/', 'credentials_in_url'],
    ['https://user@hooks.example/', 'credentials_in_url'],
    // garbage
    ['', 'invalid_url'],
    ['not a url', 'invalid_url'],
    ['/relative/path', 'invalid_url'],
    ['https://', 'invalid_url'],
    ['https://[::1', 'invalid_url'],
    ['https://256.0.0.1/', 'invalid_url'],
    ['https://exa mple.com/', 'invalid_url'],
  ];

  it('has a table of at least 45 hostile targets', () => {
    expect(hostile.length).toBeGreaterThanOrEqual(45);
  });

  it.each(hostile)('%s → %s', async (url, reason) => {
    await expect(reasonFor(url)).resolves.toBe(reason);
  });

  it('throws a UrlGuardError with a clear message', async () => {
    const rejection = validateWebhookUrl('https://169.254.169.254/', { allowPrivate: false });
    await expect(rejection).rejects.toBeInstanceOf(UrlGuardError);
    await expect(rejection).rejects.toThrow(/169\.254\.169\.254.*not a public address/);
  });
});

describe('validateWebhookUrl accepts legitimate targets', () => {
  it.each(['https://93.184.216.34/', 'https://[2606:4700::1111]/', 'https://hooks.example:8443/in?x=1'])(
    '%s',
    async (url) => {
      const parsed = await validateWebhookUrl(url, { allowPrivate: false, lookup: fakeLookup });
      expect(parsed.href).toBe(new URL(url).href);
    },
  );

  it('allowPrivate=true accepts http and loopback without resolving', async () => {
    let lookups = 0;
    const lookup: HostLookup = (hostname) => {
      lookups += 1;
      return fakeLookup(hostname);
    };
    const accept = (url: string) => validateWebhookUrl(url, { allowPrivate: true, lookup });
    await expect(accept('http://127.0.0.1:1234/')).resolves.toEqual(new URL('http://127.0.0.1:1234/'));
    await expect(accept('http://localhost:3000/hook')).resolves.toBeInstanceOf(URL);
    await expect(accept('https://evil.example/')).resolves.toBeInstanceOf(URL);
    expect(lookups).toBe(0);
  });

  it('allowPrivate=true still refuses other schemes, credentials and garbage', async () => {
    await expect(reasonFor('ftp://127.0.0.1/', true)).resolves.toBe('unsupported_scheme');
    await expect(reasonFor('http://a:b@127.0.0.1/', true)).resolves.toBe('credentials_in_url');
    await expect(reasonFor('nope', true)).resolves.toBe('invalid_url');
  });
});

describe('isForbiddenAddress', () => {
  it.each([
    '93.184.216.34',
    '8.8.8.8',
    '1.1.1.1',
    '172.15.255.255',
    '172.32.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '192.169.0.1',
    '2606:4700::1111',
    '2a00:1450:4001:81c::200e',
    '::ffff:93.184.216.34',
    '::ffff:5db8:d822',
    '64:ff9b::808:808',
    '2002:5db8:d822::1',
  ])('%s is public', (ip) => {
    expect(isForbiddenAddress(ip)).toBe(false);
  });

  it.each([
    '127.0.0.1',
    '0.0.0.0',
    '169.254.169.254',
    '::',
    '::1',
    '::ffff:7f00:1',
    '::ffff:0:7f00:1',
    'fe80::1%eth0',
    '2001::1',
    '64:ff9b:1::1',
    '4000::1',
    // not an IP at all: fail closed
    '',
    'localhost',
    '127.1',
    '[::1]',
  ])('%s is forbidden', (ip) => {
    expect(isForbiddenAddress(ip)).toBe(true);
  });
});

describe('createGuardedDispatcher enforces the check at connect time', () => {
  let server: http.Server;
  let port: number;
  let connections = 0;
  let requests = 0;
  const dispatchers: Dispatcher[] = [];

  const guarded = (opts: Parameters<typeof createGuardedDispatcher>[0]) => {
    const dispatcher = createGuardedDispatcher(opts);
    dispatchers.push(dispatcher);
    return dispatcher;
  };

  beforeAll(async () => {
    server = http.createServer((_req, res) => {
      requests += 1;
      res.end('ok');
    });
    server.on('connection', () => {
      connections += 1;
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  beforeEach(() => {
    connections = 0;
    requests = 0;
  });

  afterAll(async () => {
    await Promise.all(dispatchers.map((dispatcher) => dispatcher.close()));
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('refuses an IP-literal loopback target without connecting', async () => {
    const dispatcher = guarded({ allowPrivate: false, timeoutMs: 2000 });
    const rejection = request(`http://127.0.0.1:${port}/`, { dispatcher });
    await expect(rejection).rejects.toBeInstanceOf(UrlGuardError);
    await expect(rejection).rejects.toMatchObject({ reason: 'forbidden_address' });
    expect(connections).toBe(0);
    expect(requests).toBe(0);
  });

  it('refuses localhost by name without connecting', async () => {
    const dispatcher = guarded({ allowPrivate: false, timeoutMs: 2000 });
    await expect(request(`http://localhost:${port}/`, { dispatcher })).rejects.toBeInstanceOf(UrlGuardError);
    expect(connections).toBe(0);
  });

  it('refuses a name whose lookup returns loopback (DNS rebinding)', async () => {
    // The first answer is public, every later one is loopback: validation passes, the delivery must not.
    let calls = 0;
    const rebinding: HostLookup = async (hostname) => {
      if (hostname !== 'rebind.test') throw new Error(`unexpected lookup ${hostname}`);
      calls += 1;
      return calls === 1 ? [v4('93.184.216.34')] : [v4('127.0.0.1')];
    };
    await expect(
      validateWebhookUrl(`https://rebind.test:${port}/`, { allowPrivate: false, lookup: rebinding }),
    ).resolves.toBeInstanceOf(URL);

    const dispatcher = guarded({ allowPrivate: false, timeoutMs: 2000, lookup: rebinding });
    const rejection = request(`http://rebind.test:${port}/`, { dispatcher });
    await expect(rejection).rejects.toBeInstanceOf(UrlGuardError);
    await expect(rejection).rejects.toThrow(/rebind\.test resolves to 127\.0\.0\.1/);
    expect(calls).toBe(2);
    expect(connections).toBe(0);
  });

  it('refuses a name with one forbidden address among public ones', async () => {
    const lookup: HostLookup = async () => [v6('::1'), v4('127.0.0.1'), v4('93.184.216.34')];
    const dispatcher = guarded({ allowPrivate: false, timeoutMs: 2000, lookup });
    await expect(request(`http://multi.test:${port}/`, { dispatcher })).rejects.toMatchObject({
      reason: 'forbidden_address',
    });
    expect(connections).toBe(0);
  });

  it('connects with allowPrivate=true, to the address its lookup returned', async () => {
    const direct = guarded({ allowPrivate: true, timeoutMs: 2000 });
    const res = await request(`http://127.0.0.1:${port}/`, { dispatcher: direct });
    expect(res.statusCode).toBe(200);
    await expect(res.body.text()).resolves.toBe('ok');

    // rebind.test exists only in this lookup: a 200 proves the socket used the guarded lookup's answer.
    const lookup: HostLookup = async () => [v4('127.0.0.1')];
    const named = guarded({ allowPrivate: true, timeoutMs: 2000, lookup });
    const viaName = await request(`http://rebind.test:${port}/`, { dispatcher: named });
    expect(viaName.statusCode).toBe(200);
    await viaName.body.dump();
    expect(requests).toBe(2);
  });

  it('connects by name through the system resolver with allowPrivate=true', async () => {
    const dispatcher = guarded({ allowPrivate: true, timeoutMs: 2000 });
    const res = await request(`http://localhost:${port}/`, { dispatcher });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
  });

  it('does not follow redirects', async () => {
    const redirecting = http.createServer((_req, res) => {
      res.writeHead(302, { location: `http://127.0.0.1:${port}/` }).end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    try {
      const redirectPort = (redirecting.address() as AddressInfo).port;
      const dispatcher = guarded({ allowPrivate: true, timeoutMs: 2000 });
      const res = await request(`http://127.0.0.1:${redirectPort}/`, { dispatcher });
      expect(res.statusCode).toBe(302);
      await res.body.dump();
      expect(requests).toBe(0);
    } finally {
      await new Promise<void>((resolve) => redirecting.close(() => resolve()));
    }
  });
});
