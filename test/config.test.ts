import { loadConfig } from '../src/config.js';

describe('loadConfig (docs/reference.md §1)', () => {
  it('runs with no environment at all: embedded database under ./data on 0.0.0.0:8080', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      PORT: 8080,
      HOST: '0.0.0.0',
      DATA_DIR: './data',
      PUBLIC_BASE_URL: 'http://localhost:8080',
      LOG_LEVEL: 'info',
      WEBHOOK_MAX_ATTEMPTS: 8,
      WEBHOOK_BACKOFF_BASE_MS: 30000,
      WEBHOOK_TIMEOUT_MS: 10000,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: false,
      WEBHOOK_WORKER: true,
      SHUTDOWN_GRACE_MS: 10000,
    });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.BOOTSTRAP_OWNER_TOKEN).toBeUndefined();
    expect(c.METRICS_TOKEN).toBeUndefined();
  });

  it('derives PUBLIC_BASE_URL from PORT unless set, and drops a trailing slash', () => {
    expect(loadConfig({ PORT: '9000' }).PUBLIC_BASE_URL).toBe('http://localhost:9000');
    expect(loadConfig({ PUBLIC_BASE_URL: 'https://pay.example.com/' }).PUBLIC_BASE_URL).toBe(
      'https://pay.example.com',
    );
  });

  it('reads every documented variable', () => {
    const c = loadConfig({
      PORT: '3000',
      HOST: '127.0.0.1',
      DATABASE_URL: 'postgresql://u:p@db:5432/pp',
      DATABASE_READ_URL: 'postgresql://u:p@replica:5432/pp',
      DATA_DIR: '/var/lib/pp',
      BOOTSTRAP_OWNER_TOKEN: 'ot_0123456789abcdef',
      METRICS_TOKEN: 'm',
      LOG_LEVEL: 'warn',
      WEBHOOK_MAX_ATTEMPTS: '3',
      WEBHOOK_BACKOFF_BASE_MS: '0',
      WEBHOOK_TIMEOUT_MS: '500',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_WORKER: 'false',
      SHUTDOWN_GRACE_MS: '2500',
    });
    expect(c).toMatchObject({
      PORT: 3000,
      HOST: '127.0.0.1',
      DATABASE_URL: 'postgresql://u:p@db:5432/pp',
      DATABASE_READ_URL: 'postgresql://u:p@replica:5432/pp',
      DATA_DIR: '/var/lib/pp',
      BOOTSTRAP_OWNER_TOKEN: 'ot_0123456789abcdef',
      METRICS_TOKEN: 'm',
      LOG_LEVEL: 'warn',
      WEBHOOK_MAX_ATTEMPTS: 3,
      WEBHOOK_BACKOFF_BASE_MS: 0,
      WEBHOOK_TIMEOUT_MS: 500,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: true,
      WEBHOOK_WORKER: false,
      SHUTDOWN_GRACE_MS: 2500,
      PUBLIC_BASE_URL: 'http://localhost:3000',
    });
  });

  it('treats empty values as unset (a blank line in a .env file is not a misconfiguration)', () => {
    const c = loadConfig({ PORT: '', DATABASE_URL: '', WEBHOOK_MAX_ATTEMPTS: '' });
    expect(c.PORT).toBe(8080);
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.WEBHOOK_MAX_ATTEMPTS).toBe(8);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '80.5'],
    ['PORT', '-1'],
    ['DATABASE_URL', 'mysql://root@localhost/pp'],
    ['DATABASE_READ_URL', 'replica.internal:5432/pp'],
    ['PUBLIC_BASE_URL', 'not a url'],
    ['BOOTSTRAP_OWNER_TOKEN', 'short'],
    ['LOG_LEVEL', 'verbose'],
    ['WEBHOOK_MAX_ATTEMPTS', '0'],
    ['WEBHOOK_TIMEOUT_MS', 'soon'],
    ['WEBHOOK_ALLOW_PRIVATE_NETWORKS', 'yes'],
  ])('refuses %s=%j with a message naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(
      new RegExp(`Invalid configuration:[\\s\\S]*\\b${name}\\b`),
    );
  });

  it('names every bad variable at once', () => {
    let message = '';
    try {
      loadConfig({ PORT: 'abc', DATABASE_URL: 'mysql://x' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/PORT/);
    expect(message).toMatch(/DATABASE_URL/);
  });

  it('never echoes a secret value in the error', () => {
    expect(() => loadConfig({ BOOTSTRAP_OWNER_TOKEN: 'tooshort123' })).toThrow(/BOOTSTRAP_OWNER_TOKEN/);
    expect(() => loadConfig({ BOOTSTRAP_OWNER_TOKEN: 'tooshort123' })).not.toThrow(/tooshort123/);
  });
});
