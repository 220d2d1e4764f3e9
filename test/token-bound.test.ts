import fc from 'fast-check';
import { countTokens as o200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as p50k } from 'gpt-tokenizer/encoding/p50k_base';
import { countTokens as r50k } from 'gpt-tokenizer/encoding/r50k_base';
import { countTokens as harmony } from 'gpt-tokenizer/encoding/o200k_harmony';
import { INLINE_MAX_BYTES, PromptTokenizer, utf8Bytes } from '../src/modules/proxy/prompt-tokenizer.js';
import countAll, { countBounded, MAX_PIECE_CHARS } from '../src/modules/proxy/token-worker.js';

/**
 * The prompt estimate's fallback (docs/proxy.md "The prompt estimate"): a prompt never has more tokens
 * than UTF-8 bytes. Byte-level BPE starts from one token per byte and only merges, and a special token
 * stands for several bytes of text, so each of gpt-tokenizer's encodings is checked here on arbitrary
 * Unicode (lone surrogates, which encode as the 3-byte U+FFFD, included), on CJK text and on strings of
 * special tokens; and so is the proxy's own counter, which slices long runs.
 */

const PLAIN = { disallowedSpecial: new Set<string>() };
const ENCODINGS = { o200k, cl100k, p50k, r50k, harmony };
const cjk = fc
  .array(fc.integer({ min: 0x4e00, max: 0x9fff }), { maxLength: 400 })
  .map((cs) => String.fromCharCode(...cs));
const special = fc
  .array(fc.constantFrom('<|endoftext|>', '<|im_start|>', '<|fim_prefix|>', ' ', 'a', '\n'), {
    maxLength: 50,
  })
  .map((parts) => parts.join(''));
const texts = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 400 }),
  fc.string({ unit: 'grapheme', maxLength: 200 }),
  cjk,
  special,
);

describe('a prompt has at most as many tokens as UTF-8 bytes', () => {
  for (const [name, count] of Object.entries(ENCODINGS))
    it(`${name}: for arbitrary text`, () => {
      fc.assert(
        fc.property(texts, (text) => count(text, PLAIN) <= Buffer.byteLength(text)),
        { numRuns: 300 },
      );
    });

  it('the counter that slices long runs stays within the bound, and is exact for ordinary text', () => {
    fc.assert(
      fc.property(texts, (text) => countBounded(text) <= Buffer.byteLength(text)),
      { numRuns: 500 },
    );
    const prose = 'The quick brown fox jumps over the lazy dog, twice. '.repeat(40);
    expect(countBounded(prose)).toBe(o200k(prose, PLAIN));
    // A long run without a space is counted slice by slice: at most one token more per slice.
    const run = 'abcdefghij'.repeat(100);
    const slices = Math.ceil(run.length / MAX_PIECE_CHARS);
    expect(countBounded(run)).toBeGreaterThanOrEqual(o200k(run, PLAIN));
    expect(countBounded(run)).toBeLessThanOrEqual(o200k(run, PLAIN) + slices);
  });
});

describe('PromptTokenizer', () => {
  // The deadline is tested below; here a loaded CI machine starting the worker must not hit it.
  const tokenizer = new PromptTokenizer({ threads: 1, deadlineMs: 120_000 });
  afterAll(() => tokenizer.close());

  it('counts a large prompt in a worker, to the same count as on the event loop', async () => {
    const texts = [
      'You are a helpful assistant.',
      'Summarize: ' + 'lorem ipsum dolor sit amet '.repeat(4000),
    ];
    expect(utf8Bytes(texts)).toBeGreaterThan(INLINE_MAX_BYTES);
    expect(await tokenizer.count(texts)).toBe(countAll(texts));
    expect(tokenizer.boundedCounts).toBe(0);
  });

  it('a count past its deadline is the byte bound', async () => {
    const hurried = new PromptTokenizer({ threads: 1, deadlineMs: 1 });
    try {
      const texts = ['漢字'.repeat(100_000)];
      expect(await hurried.count(texts)).toBe(600_000);
      expect(hurried.boundedCounts).toBe(1);
    } finally {
      await hurried.close();
    }
  });
});
