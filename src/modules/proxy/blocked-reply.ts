import { randomBytes } from 'node:crypto';
import { ZERO_COST_DETAILS, usdcText } from '../../shared/money.js';
import { sseData } from './sse-relay.js';

export type BlockReason =
  'not_connected' | 'insufficient_balance' | 'rate_limited' | 'allowance_exceeded' | 'key_limit_exceeded';

/** Default texts; a paywall may set its own (`connectMessageTemplate` / `topupMessageTemplate`, with {url}). */
export const DEFAULT_CONNECT_TEMPLATE =
  'To continue, connect your wallet to this app: {url}\n\nOnce connected, send your message again.';
export const DEFAULT_TOPUP_TEMPLATE =
  'Your balance is too low for this request. Top up here: {url}\n\nThen send your message again.';

export function blockedText(
  template: string | null,
  reason: 'not_connected' | 'insufficient_balance',
  url: string,
): string {
  const t = template ?? (reason === 'not_connected' ? DEFAULT_CONNECT_TEMPLATE : DEFAULT_TOPUP_TEMPLATE);
  return t.split('{url}').join(url);
}

/**
 * When a limit resets, as people read it in a chat ("30 Nov 2026 at 00:00 UTC"): the reply is rendered as an
 * ordinary assistant message, so no ISO timestamp; the machine-readable instant is `paywall.resetsAt`.
 */
export function resetText(at: Date): string {
  const day = at.toLocaleDateString('en-GB', {
    day: 'numeric',
    month: 'short',
    year: 'numeric',
    timeZone: 'UTC',
  });
  const time = at.toLocaleTimeString('en-GB', {
    hour: '2-digit',
    minute: '2-digit',
    hour12: false,
    timeZone: 'UTC',
  });
  return `${day} at ${time} UTC`;
}

/** The reply to a request over a daily limit says which limit and when it resets. */
export function rateLimitedText(what: string, resetsAt: Date): string {
  return (
    `You have reached today's limit of ${what} for this app. ` +
    `It resets on ${resetText(resetsAt)}; please try again then.`
  );
}

/**
 * The reply when the app's allowance (the wallet user's spending limit for it, docs/reference.md §16) is
 * used up: how much, for which period, when it resets, and the wallet page where the limit is changed.
 */
export function allowanceText(limitRaw: bigint, period: string, resetsAt: Date | null, url: string): string {
  const per = period === 'total' ? 'in total' : `per ${period}`;
  const when = resetsAt ? ` It resets on ${resetText(resetsAt)}.` : '';
  return (
    `This app has reached the spending limit of ${usdcText(limitRaw)} ${per} set in your wallet.${when} ` +
    `To keep going now, raise the limit in your wallet: ${url}`
  );
}

/**
 * The reply when the end-user key's own spending limit (docs/reference.md §19) is used up: how much, for
 * which period, and when it resets. The key's owner (the app) set it; there is nothing to pay.
 */
export function keyLimitText(limitRaw: bigint, period: string, resetsAt: Date | null): string {
  const per = period === 'total' ? 'in total' : `per ${period}`;
  const when = resetsAt
    ? ` It resets on ${resetText(resetsAt)}; please try again then.`
    : ' Ask the app for a new key or a higher limit.';
  return `This key has reached its spending limit of ${usdcText(limitRaw)} ${per}.${when}`;
}

export interface BlockedReply {
  id: string;
  created: number;
  model: string;
  text: string;
  paywall: { reason: BlockReason; url: string | null; resetsAt?: string };
}

/** What a payment-blocked reply says: why, where to go (connect or top up), and when a limit resets. */
export interface BlockedReplyOptions {
  model: string;
  reason: BlockReason;
  /** The connect or top-up link; null for a limit (nothing to do but wait). */
  url: string | null;
  text: string;
  /** When a daily limit resets. */
  resetsAt?: Date;
}

export function blockedReply({ model, reason, url, text, resetsAt }: BlockedReplyOptions): BlockedReply {
  return {
    id: `chatcmpl-${randomBytes(12).toString('base64url')}`,
    created: Math.floor(Date.now() / 1000),
    model,
    text,
    paywall: { reason, url, ...(resetsAt ? { resetsAt: resetsAt.toISOString() } : {}) },
  };
}

const ZERO_USAGE = {
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  cost: '0',
  cost_details: ZERO_COST_DETAILS,
};

/**
 * docs/reference.md §6: an ordinary `chat.completion` whose assistant message carries the link, plus the
 * `paywall` extension field. Every OpenAI SDK renders it as a normal reply.
 */
export function blockedCompletion(r: BlockedReply): Record<string, unknown> {
  return {
    id: r.id,
    object: 'chat.completion',
    created: r.created,
    model: r.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: r.text, refusal: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: ZERO_USAGE,
    paywall: r.paywall,
  };
}

/** The same reply as an SSE stream: the text, a `stop` chunk, the usage chunk if asked for, `[DONE]`. */
export function blockedStream(r: BlockedReply, includeUsage: boolean): string {
  const base = { id: r.id, object: 'chat.completion.chunk', created: r.created, model: r.model };
  const chunks = [
    {
      ...base,
      choices: [
        { index: 0, delta: { role: 'assistant', content: r.text }, logprobs: null, finish_reason: null },
      ],
      paywall: r.paywall,
    },
    {
      ...base,
      choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }],
      paywall: r.paywall,
    },
  ];
  if (includeUsage) chunks.push({ ...base, choices: [], usage: ZERO_USAGE, paywall: r.paywall } as any);
  return chunks.map((c) => sseData(JSON.stringify(c))).join('') + sseData('[DONE]');
}
