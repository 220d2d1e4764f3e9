import { Readable } from 'node:stream';
import type { ProviderClient, UpstreamOptions, UpstreamResponse } from '../providers/provider-client.js';
import { jsonOr, type Json } from './formats/common.js';
import { Dropped } from './formats/field-policy.js';
import {
  translateAnswer,
  translateError,
  translateRequest,
  translateStream,
  type Route,
} from './formats/hub.js';
import type { ClientAnswerContext } from './formats/neutral.js';
import { readLimited } from './upstream-client.js';
import { MAX_TOKEN_COUNT } from './wire-format.js';

/** Largest provider error body read for translation. */
const MAX_ERROR_BYTES = 1024 * 1024;

const bodyOf = (res: UpstreamResponse, text: string): UpstreamResponse => {
  const buf = Buffer.from(text);
  return { ...res, contentLength: buf.length, body: Readable.from([buf]) as any };
};

/**
 * The dropped fields the client sent (`cache_control` may sit anywhere in its body; `text.verbosity` is
 * under its `text`): the payload also holds fields the service added, such as a stream's
 * `stream_options.include_usage`, and those were never the client's to be told about.
 */
function namedBy(dropped: Dropped, clientFields: readonly string[] | undefined): Dropped {
  if (!clientFields) return dropped;
  const sent = new Set(clientFields);
  const named = new Dropped();
  for (const name of dropped.list)
    if (name === 'cache_control' || sent.has(name.split('.')[0])) named.add(name);
  return named;
}

/**
 * A ProviderClient that speaks the client's format to a provider of another kind (docs/reference.md §15
 * "Across formats"): the request goes through the hub (formats/hub.ts: client adapter → neutral →
 * provider adapter) before the provider kind's own client sends it; the answer, stream or error comes back
 * the same way before the metered core reads it, so metering, settlement and the client's events stay
 * those of the client's format. This file only moves bytes.
 */
export function translatingClient(route: Route): ProviderClient {
  const base = route.provider.client;
  return {
    kind: base.kind,
    validate(body, up, reasons) {
      // With no cap from the client, the largest one: whether thinking is asked for then depends on the
      // client's fields and the model alone (the metered core decides the cap afterwards).
      const { request } = translateRequest(
        route,
        { ...body, model: String(body.model ?? '') },
        {
          holdCap: MAX_TOKEN_COUNT,
          reasoning: reasons,
          capParameter: up.capParameter,
          dropped: new Dropped(),
        },
      );
      return { thinks: request.thinking !== undefined && request.thinking !== null };
    },
    async post(up, _endpoint, payload, opts: UpstreamOptions) {
      const body = JSON.parse(payload) as Json;
      const dropped = new Dropped();
      // `user` and `metadata` (the end user's id is in them) are never forwarded, and left out of
      // `payload` already: toward the other API they are dropped, and named (docs/reference.md §21).
      for (const name of opts.clientDropped ?? []) dropped.add(name);
      const { neutral, request } = translateRequest(route, body, {
        holdCap: opts.holdCap ?? 4096,
        reasoning: opts.reasoning ?? false,
        capParameter: up.capParameter,
        dropped,
      });
      const ctx: ClientAnswerContext = {
        model: opts.clientModel ?? String(body.model ?? ''),
        body,
        inputTokens: opts.inputTokens ?? 0,
      };
      const endpoint = route.provider.endpoint(neutral);
      const res = {
        ...(await base.post(up, endpoint, JSON.stringify(request), opts)),
        answerHeaders: namedBy(dropped, opts.clientFields).header(),
      };
      if (res.status < 200 || res.status >= 300) {
        let text = '';
        try {
          text = await readLimited(res, MAX_ERROR_BYTES);
        } catch {
          /* the status says enough */
        }
        return bodyOf(res, translateError(route, text, res.status));
      }
      if (!opts.stream) {
        const text = await readLimited(res, opts.maxBytes ?? Number.MAX_SAFE_INTEGER);
        const json = jsonOr(text);
        return bodyOf(res, json ? JSON.stringify(translateAnswer(route, json, neutral, ctx)) : text);
      }
      const stream = translateStream(route, neutral, ctx);
      const source = res.body;
      async function* translated() {
        const decoder = new TextDecoder();
        try {
          for await (const chunk of source) {
            const out = stream.feed(decoder.decode(chunk as Buffer, { stream: true }));
            if (out) yield Buffer.from(out);
            if (stream.done) break;
          }
          const tail = stream.end();
          if (tail) yield Buffer.from(tail);
        } finally {
          source.destroy();
        }
      }
      return { ...res, contentLength: null, body: Readable.from(translated()) as any };
    },
  };
}
