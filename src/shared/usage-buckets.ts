/**
 * Usage as providers bill it (docs/reference.md §13, §22): every token of an answer falls in exactly one
 * bucket. The input side is cache read + cache write + audio prompt + image prompt + prompt (the rest of
 * the input, text); the output side is reasoning + audio completion + image completion + completion (the
 * rest of the output, text).
 */
export const BUCKETS = [
  'prompt',
  'cacheRead',
  'cacheWrite',
  'audioPrompt',
  'imagePrompt',
  'reasoning',
  'audioCompletion',
  'imageCompletion',
  'completion',
] as const;
/** The buckets only image models fill (gpt-image-1): absent from records written before them. */
export const IMAGE_BUCKETS: readonly Bucket[] = ['imagePrompt', 'imageCompletion'];
export type Bucket = (typeof BUCKETS)[number];

/** Token counts per bucket: non-negative integers, each token counted once. */
export type UsageBuckets = Record<Bucket, number>;

/**
 * What a provider reported, before it is split into buckets: the input and output totals (absent when
 * the provider did not send them: the proxy counts them itself) and the parts of them it itemised.
 */
export interface ReportedUsage {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheWrite?: number;
  audioPrompt?: number;
  imagePrompt?: number;
  reasoning?: number;
  audioCompletion?: number;
  imageCompletion?: number;
}

/** All input tokens (what a provider calls prompt_tokens / input_tokens). */
export const inputTokens = (u: UsageBuckets): number =>
  u.prompt + u.cacheRead + u.cacheWrite + u.audioPrompt + u.imagePrompt;
/** All output tokens (completion_tokens / output_tokens, reasoning included). */
export const outputTokens = (u: UsageBuckets): number =>
  u.completion + u.reasoning + u.audioCompletion + u.imageCompletion;

/** Plain text usage: all input is prompt, all output is completion. */
export const textUsage = (prompt: number, completion: number): UsageBuckets => ({
  prompt,
  cacheRead: 0,
  cacheWrite: 0,
  audioPrompt: 0,
  imagePrompt: 0,
  reasoning: 0,
  audioCompletion: 0,
  imageCompletion: 0,
  completion,
});

/** Takes up to `want` of what is `left`: the itemised part of a total never exceeds it. */
const take = (want: number | undefined, left: number): number => Math.max(0, Math.min(want ?? 0, left));

/**
 * Splits reported totals into buckets. The itemised parts are taken from the total in a fixed order
 * (cache read, cache write, audio; reasoning, audio), each clipped to what is left, so a provider that
 * itemises more than its total is never charged twice for a token and no bucket goes below 0.
 */
export function splitUsage(input: number, output: number, r: ReportedUsage): UsageBuckets {
  let inLeft = input;
  const cacheRead = take(r.cacheRead, inLeft);
  inLeft -= cacheRead;
  const cacheWrite = take(r.cacheWrite, inLeft);
  inLeft -= cacheWrite;
  const audioPrompt = take(r.audioPrompt, inLeft);
  inLeft -= audioPrompt;
  const imagePrompt = take(r.imagePrompt, inLeft);
  inLeft -= imagePrompt;
  let outLeft = output;
  const reasoning = take(r.reasoning, outLeft);
  outLeft -= reasoning;
  const audioCompletion = take(r.audioCompletion, outLeft);
  outLeft -= audioCompletion;
  const imageCompletion = take(r.imageCompletion, outLeft);
  outLeft -= imageCompletion;
  return {
    prompt: inLeft,
    cacheRead,
    cacheWrite,
    audioPrompt,
    imagePrompt,
    reasoning,
    audioCompletion,
    imageCompletion,
    completion: outLeft,
  };
}

/**
 * Buckets as stored (charge metadata), when whole and valid; else null. The image buckets may be absent
 * (records written before them): 0.
 */
export function storedBuckets(v: unknown): UsageBuckets | null {
  if (typeof v !== 'object' || v === null) return null;
  const out = {} as UsageBuckets;
  for (const b of BUCKETS) {
    const n = (v as Record<string, unknown>)[b] ?? (IMAGE_BUCKETS.includes(b) ? 0 : undefined);
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) return null;
    out[b] = n;
  }
  return out;
}
