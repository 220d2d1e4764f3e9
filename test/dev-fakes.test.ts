import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The README's local fakes (`npm run fake-providers`, `npm run fake-stripe`) as a reader runs them: the
 * built CLIs, on the port the variable names. A busy port (another copy still running, say) ends the CLI
 * with status 1 and one line naming the port, not a stack trace.
 */
const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..');

const CLIS = [
  {
    name: 'fake-providers',
    script: 'dist/test/helpers/fake-providers-cli.js',
    portVar: 'FAKE_PROVIDERS_PORT',
  },
  { name: 'fake-stripe', script: 'dist/src/dev/fake-stripe-cli.js', portVar: 'FAKE_STRIPE_PORT' },
];

function run(
  script: string,
  env: Record<string, string>,
  until?: RegExp,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [join(ROOT, script)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let stopping = false;
  proc.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    // The CLI installs its signal handlers right after printing: give it a moment, as a reader would.
    if (!stopping && until?.test(stdout)) {
      stopping = true;
      setTimeout(() => proc.kill('SIGTERM'), 500);
    }
  });
  proc.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
  return new Promise((resolve) =>
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

describe('the local fakes of the quick starts', () => {
  let busy: Server;
  let port: number;
  beforeAll(async () => {
    busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    port = (busy.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((r) => busy.close(r));
  });

  it.each(CLIS)('$name on a busy port exits 1 with one line naming it', async ({ script, portVar }) => {
    const out = await run(script, { [portVar]: String(port) });
    expect({ code: out.code, lines: out.stderr.trim().split('\n') }).toEqual({
      code: 1,
      lines: [expect.stringContaining(`EADDRINUSE`)],
    });
    expect(out.stderr).toContain(`127.0.0.1:${port}`);
  });

  it('fake-providers --help prints its routes and the port variable and exits 0 without listening', async () => {
    const proc = spawn(process.execPath, [join(ROOT, 'dist/test/helpers/fake-providers-cli.js'), '--help'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    proc.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((r) => proc.once('exit', r));
    clearTimeout(timer);
    expect(code).toBe(0);
    expect(stdout).toContain('FAKE_PROVIDERS_PORT');
    expect(stdout).toContain('/v1/audio/transcriptions');
    expect(stdout).not.toContain('fake providers on');
  });

  it('fake-providers listens on the port FAKE_PROVIDERS_PORT names and stops on SIGTERM', async () => {
    const free = createServer();
    await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
    const freePort = (free.address() as { port: number }).port;
    await new Promise((r) => free.close(r));
    const out = await run(
      'dist/test/helpers/fake-providers-cli.js',
      { FAKE_PROVIDERS_PORT: String(freePort) },
      /fake providers on/,
    );
    expect(out.stdout).toContain(`fake providers on http://127.0.0.1:${freePort}/v1`);
    expect(out.code).toBe(0);
  });
});
