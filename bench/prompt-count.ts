/**
 * Prompt-count micro-bench (issue 30, finding 3): what the prompt estimate costs a request, per size.
 *
 *   npm run build && node dist/bench/prompt-count.js
 *
 * For each body it times, on this thread, chat's parse with its texts counted at once (the tokenizer
 * directly, as before the count was bounded) and the request path's way (texts set aside, then counted
 * by PromptTokenizer: inline up to INLINE_MAX_BYTES, in a worker above), in microseconds per request
 * (the median of ROUNDS rounds of REPS requests). For the large bodies it also reports how long the
 * event loop was held: the path's synchronous part, the count itself running in a worker.
 */
import { env } from 'node:process';
import { countTokens } from 'gpt-tokenizer';
import { chatFormat } from '../src/modules/proxy/chat-format.js';
import { PromptTokenizer } from '../src/modules/proxy/prompt-tokenizer.js';
import { collectTexts } from '../src/modules/proxy/token-counter.js';

const ROUNDS = Number(env.ROUNDS ?? 5);

const chat = (content: string) => ({
  model: 'gpt-4o-mini',
  messages: [
    { role: 'system', content: 'You are a helpful assistant. Answer briefly and cite your sources.' },
    { role: 'user', content },
  ],
});
const words = (n: number) =>
  Array.from({ length: n }, (_, i) => ['the', 'model', 'answers', 'quickly,', 'today'][i % 5]).join(' ');
const random = (n: number, alphabet: string) =>
  Array.from({ length: n }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
const cjk = Array.from({ length: 2000 }, (_, i) => String.fromCharCode(0x4e00 + i)).join('');

/** Each case makes its body per request (random text fresh each time: no tokenizer cache helps it). */
const CASES: { name: string; body: () => unknown; reps: number; before: boolean }[] = [
  {
    name: 'small chat (~40 tokens)',
    body: () => chat('What is the capital of France? One word, please.'),
    reps: 2000,
    before: true,
  },
  { name: 'chat of 1 KB English', body: () => chat(words(180)), reps: 1000, before: true },
  {
    name: 'chat of 2 KB random letters',
    body: () => chat(random(2000, 'abcdefghijklmnopqrstuvwxyz ')),
    reps: 50,
    before: true,
  },
  { name: 'chat of 64 KB English', body: () => chat(words(11_000)), reps: 20, before: true },
  {
    name: 'chat of 64 KB random letters',
    body: () => chat(random(64 * 1024, 'abcdefghijklmnopqrstuvwxyz')),
    reps: 5,
    before: false,
  },
  { name: 'chat of 64 KB CJK (21,845 chars)', body: () => chat(random(21_845, cjk)), reps: 5, before: false },
];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const PLAIN = { disallowedSpecial: new Set<string>() };

async function main() {
  const tokenizer = new PromptTokenizer();
  console.log(
    'body | before: on the event loop (µs) | after: whole count (µs) | after: event loop held (µs)',
  );
  for (const c of CASES) {
    const before: number[] = [];
    const total: number[] = [];
    const held: number[] = [];
    for (let r = 0; r < ROUNDS + 1; r++) {
      const bodies = Array.from({ length: c.reps }, c.body);
      if (c.before) {
        // As before the bound: every text through the tokenizer at once, on the event loop.
        const t0 = performance.now();
        for (const body of bodies) {
          const { texts } = collectTexts(() => chatFormat.parse(body));
          for (const t of texts) countTokens(t, PLAIN);
        }
        if (r > 0) before.push(((performance.now() - t0) * 1000) / c.reps);
      }
      let sync = 0;
      const t0 = performance.now();
      for (const body of bodies) {
        const s0 = performance.now();
        const { texts } = collectTexts(() => chatFormat.parse(body));
        const pending = tokenizer.count(texts);
        sync += performance.now() - s0;
        await pending;
      }
      if (r === 0) continue; // warm-up (and the worker's start)
      total.push(((performance.now() - t0) * 1000) / c.reps);
      held.push((sync * 1000) / c.reps);
    }
    const b = c.before ? median(before).toFixed(1) : '(not run: seconds to minutes)';
    console.log(`${c.name} | ${b} | ${median(total).toFixed(1)} | ${median(held).toFixed(1)}`);
  }
  await tokenizer.close();
}

await main();
