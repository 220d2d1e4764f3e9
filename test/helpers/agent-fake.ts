import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A model provider for agent tools (Claude Code, Codex, agent frameworks) on 127.0.0.1: Anthropic's
 * Messages API and OpenAI's chat completions and Responses API, JSON or SSE as asked. An agent turn is
 * answered with one call of the shell tool the agent offered (its name and input shape recognised), and the
 * turn after the tool's result with a final text; a request without tools gets a short text. Every request
 * and every answer's usage is recorded, so a test computes the charge independently.
 */

export interface AgentRequest {
  url: string;
  headers: IncomingHttpHeaders;
  body: any;
}

/** The usage the fake reported for one answer, in its provider's terms. */
export interface AgentUsage {
  api: 'messages' | 'chat' | 'responses';
  input: number;
  output: number;
  /** Anthropic's cache read on top of `input`; OpenAI's cached part of it. */
  cacheRead: number;
}

/** The final answer's text. */
export const FINAL_TEXT = 'The command printed paywall-ok.';
/** What the tool call runs. */
export const TOOL_COMMAND = 'echo paywall-ok';

const TOOL_NAMES = /^(Bash|shell|shell_command|exec_command|local_shell|bash|run_shell|get_weather|lookup)$/;

/** The tool to call and its input, for the tool an agent offered. */
function toolCall(tools: any[]): { name: string; input: Record<string, unknown> } | null {
  const named = tools
    .flatMap((t: any) => (t?.type === 'namespace' && Array.isArray(t.tools) ? t.tools : [t]))
    .map((t: any) => ({ t, name: t?.name ?? t?.function?.name }))
    .filter((x) => typeof x.name === 'string');
  const hit = named.find((x) => TOOL_NAMES.test(x.name)) ?? named[0];
  if (!hit) return null;
  const schema = hit.t.input_schema ?? hit.t.parameters ?? hit.t.function?.parameters ?? {};
  const props = Object.keys(schema.properties ?? {});
  if (props.includes('command'))
    return {
      name: hit.name,
      input:
        schema.properties.command.type === 'array'
          ? { command: ['bash', '-lc', TOOL_COMMAND] }
          : { command: TOOL_COMMAND, description: 'Print a word' },
    };
  if (props.includes('cmd')) return { name: hit.name, input: { cmd: TOOL_COMMAND } };
  const first = props[0];
  return { name: hit.name, input: first ? { [first]: 'Paris' } : {} };
}

/** The conversation already holds a tool's result (the agent ran the call). */
function hasToolResult(body: any): boolean {
  const text = JSON.stringify(body.messages ?? body.input ?? []);
  return /"tool_result"|"role":"tool"|"function_call_output"|"custom_tool_call_output"/.test(text);
}

/** Thinking is on, the last user turn answers tool calls, and the assistant turn that made them has no thinking. */
function thinkingWithoutIt(body: any): boolean {
  if (body.thinking?.type !== 'enabled' || !Array.isArray(body.messages)) return false;
  const [made, last] = body.messages.slice(-2);
  if (!Array.isArray(last?.content) || !last.content.some((b: any) => b?.type === 'tool_result'))
    return false;
  const first = Array.isArray(made?.content) ? made.content[0]?.type : null;
  return first !== 'thinking' && first !== 'redacted_thinking';
}

const sse = (event: string | null, data: unknown) =>
  `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;

export class AgentFake {
  readonly requests: AgentRequest[] = [];
  readonly usages: AgentUsage[] = [];
  /** Input tokens each answer reports (output: 40 for a tool call, 12 for text). */
  inputTokens = 1200;
  private n = 0;
  private server!: Server;
  /** The provider's base URL (`http://127.0.0.1:<port>/v1`). */
  baseUrl = '';

  static async start(): Promise<AgentFake> {
    const fake = new AgentFake();
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        let body: any = {};
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
        } catch {
          /* not JSON */
        }
        fake.requests.push({ url: req.url ?? '', headers: req.headers, body });
        fake.answer(req.url ?? '', body, res);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    fake.server = server;
    fake.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    return fake;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  reset(): void {
    this.requests.length = 0;
    this.usages.length = 0;
  }

  /** Requests of one API (`/messages`, `/chat/completions`, `/responses`). */
  of(path: string): AgentRequest[] {
    return this.requests.filter((r) => r.url.endsWith(path));
  }

  private answer(url: string, body: any, res: import('node:http').ServerResponse): void {
    if (url.endsWith('/messages/count_tokens')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ input_tokens: 42 }));
      return;
    }
    const tools = Array.isArray(body.tools) ? body.tools : [];
    const call = !hasToolResult(body) ? toolCall(tools) : null;
    const id = ++this.n;
    const input = this.inputTokens;
    const output = call ? 40 : 12;
    const text = call ? '' : tools.length ? FINAL_TEXT : 'OK';
    if (url.endsWith('/messages')) {
      if (thinkingWithoutIt(body)) {
        // Anthropic's refusal: with thinking on, the assistant turn whose tool calls the last user turn
        // answers must start with its thinking block.
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            type: 'error',
            error: {
              type: 'invalid_request_error',
              message:
                'messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.',
            },
          }),
        );
        return;
      }
      this.usages.push({ api: 'messages', input, output, cacheRead: 0 });
      return this.messages(
        res,
        body.stream === true,
        id,
        call,
        text,
        input,
        output,
        body.model,
        body.thinking?.type === 'enabled',
      );
    }
    if (url.endsWith('/chat/completions')) {
      this.usages.push({ api: 'chat', input, output, cacheRead: 0 });
      return this.chat(res, body.stream === true, id, call, text, input, output, body.model);
    }
    if (url.endsWith('/responses')) {
      this.usages.push({ api: 'responses', input, output, cacheRead: 0 });
      return this.responses(res, body.stream === true, id, call, text, input, output, body.model, tools);
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
  }

  private messages(
    res: import('node:http').ServerResponse,
    stream: boolean,
    id: number,
    call: ReturnType<typeof toolCall>,
    text: string,
    input: number,
    output: number,
    model: string,
    thinks = false,
  ): void {
    const block = call
      ? { type: 'tool_use', id: `toolu_fake${id}`, name: call.name, input: call.input }
      : { type: 'text', text };
    // With thinking on, Anthropic's answer starts with its thinking block (the client sends it back).
    const thought = { type: 'thinking', thinking: 'Running it.', signature: `sig_fake${id}` };
    const message = {
      id: `msg_fake${id}`,
      type: 'message',
      role: 'assistant',
      model,
      content: thinks ? [thought, block] : [block],
      stop_reason: call ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: {
        input_tokens: input,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        output_tokens: output,
      },
    };
    if (!stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(message));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let out = sse('message_start', {
      type: 'message_start',
      message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } },
    });
    const at = thinks ? 1 : 0;
    if (thinks) {
      out += sse('content_block_start', {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'thinking', thinking: '', signature: '' },
      });
      out += sse('content_block_delta', {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'thinking_delta', thinking: thought.thinking },
      });
      out += sse('content_block_delta', {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'signature_delta', signature: thought.signature },
      });
      out += sse('content_block_stop', { type: 'content_block_stop', index: 0 });
    }
    out += sse('content_block_start', {
      type: 'content_block_start',
      index: at,
      content_block: call ? { ...block, input: {} } : { type: 'text', text: '' },
    });
    out += sse('content_block_delta', {
      type: 'content_block_delta',
      index: at,
      delta: call
        ? { type: 'input_json_delta', partial_json: JSON.stringify(call.input) }
        : { type: 'text_delta', text },
    });
    out += sse('content_block_stop', { type: 'content_block_stop', index: at });
    out += sse('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: message.stop_reason, stop_sequence: null },
      usage: { output_tokens: output },
    });
    out += sse('message_stop', { type: 'message_stop' });
    res.end(out);
  }

  private chat(
    res: import('node:http').ServerResponse,
    stream: boolean,
    id: number,
    call: ReturnType<typeof toolCall>,
    text: string,
    input: number,
    output: number,
    model: string,
  ): void {
    const usage = { prompt_tokens: input, completion_tokens: output, total_tokens: input + output };
    const toolCalls = call
      ? [
          {
            id: `call_fake${id}`,
            type: 'function',
            function: { name: call.name, arguments: JSON.stringify(call.input) },
          },
        ]
      : undefined;
    const finish = call ? 'tool_calls' : 'stop';
    const base = { id: `chatcmpl-fake${id}`, created: 1, model };
    if (!stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          ...base,
          object: 'chat.completion',
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: call ? null : text, tool_calls: toolCalls },
              finish_reason: finish,
            },
          ],
          usage,
        }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (delta: unknown, finish_reason: string | null = null) =>
      sse(null, { ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason }] });
    let out = chunk({ role: 'assistant', content: '' });
    out += call
      ? chunk({ tool_calls: toolCalls!.map((c, index) => ({ index, ...c })) })
      : chunk({ content: text });
    out += chunk({}, finish);
    out += sse(null, { ...base, object: 'chat.completion.chunk', choices: [], usage });
    out += 'data: [DONE]\n\n';
    res.end(out);
  }

  private responses(
    res: import('node:http').ServerResponse,
    stream: boolean,
    id: number,
    call: ReturnType<typeof toolCall>,
    text: string,
    input: number,
    output: number,
    model: string,
    tools: any[],
  ): void {
    const usage = {
      input_tokens: input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: input + output,
    };
    let item: Record<string, unknown>;
    if (call) {
      const ns = tools.find(
        (t: any) => t?.type === 'namespace' && t.tools?.some((f: any) => f.name === call.name),
      )?.name;
      item = {
        id: `fc_fake${id}`,
        type: 'function_call',
        status: 'completed',
        call_id: `call_fake${id}`,
        name: call.name,
        arguments: JSON.stringify(call.input),
        ...(ns ? { namespace: ns } : {}),
      };
    } else
      item = {
        id: `msg_fake${id}`,
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text, annotations: [] }],
      };
    const response = {
      id: `resp_fake${id}`,
      object: 'response',
      created_at: 1,
      status: 'completed',
      model,
      output: [item],
      usage,
      error: null,
      incomplete_details: null,
    };
    if (!stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(response));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let seq = 0;
    const ev = (type: string, data: Record<string, unknown>) =>
      sse(type, { type, sequence_number: seq++, ...data });
    let out = ev('response.created', {
      response: { ...response, status: 'in_progress', output: [], usage: null },
    });
    out += ev('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress' } });
    if (!call)
      out += ev('response.output_text.delta', {
        item_id: item.id,
        output_index: 0,
        content_index: 0,
        delta: text,
      });
    out += ev('response.output_item.done', { output_index: 0, item });
    out += ev('response.completed', { response });
    res.end(out);
  }
}

/** One request a tool sent, as the tap saw it, with the headers of the paywall's answer. */
export interface TappedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  status: number;
  answerHeaders: Record<string, string>;
}

/**
 * A loopback tap between a tool and the paywall: forwards every request as it is (streams included) and
 * records what the tool sent and the headers the paywall answered with, so a test compares what the tool
 * sent with what reached the provider.
 */
export class Tap {
  readonly requests: TappedRequest[] = [];

  private server!: Server;
  /** The tap's base URL, to give the tool in place of the paywall's. */
  url = '';

  static async start(target: string): Promise<Tap> {
    const tap = new Tap();
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', async () => {
        const raw = Buffer.concat(chunks);
        let body: any = null;
        try {
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          /* not JSON */
        }
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(req.headers))
          if (typeof v === 'string' && !['host', 'content-length', 'connection'].includes(k)) headers[k] = v;
        try {
          const up = await fetch(`${target}${req.url}`, {
            method: req.method,
            headers,
            body: req.method === 'GET' || req.method === 'HEAD' ? undefined : raw,
          });
          const answerHeaders: Record<string, string> = {};
          up.headers.forEach((v, k) => (answerHeaders[k] = v));
          tap.requests.push({
            path: req.url ?? '',
            headers: req.headers,
            body,
            status: up.status,
            answerHeaders,
          });
          const out = { ...answerHeaders };
          delete out['content-length'];
          delete out['content-encoding'];
          delete out['transfer-encoding'];
          res.writeHead(up.status, out);
          if (up.body) for await (const c of up.body as any) res.write(c);
          res.end();
        } catch {
          res.destroy();
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    tap.server = server;
    tap.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return tap;
  }

  reset(): void {
    this.requests.length = 0;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
