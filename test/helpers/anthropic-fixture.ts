/**
 * Anthropic Messages API shapes as Anthropic's API reference and real recordings show them (field names,
 * nesting, event order), for the fake upstream and the relay tests.
 */

/**
 * The streaming guide's basic example (Anthropic docs, "Streaming Messages": event types in order):
 * message_start with the input usage, a text block, a ping, message_delta with the cumulative
 * `output_tokens`, message_stop. Every event is named (`event:`) and its data repeats the type.
 */
export const ANTHROPIC_STREAM_BASIC = [
  'event: message_start',
  'data: {"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY", "type": "message", "role": "assistant", "content": [], "model": "claude-3-5-sonnet-20241022", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}',
  '',
  'event: content_block_start',
  'data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}',
  '',
  'event: ping',
  'data: {"type": "ping"}',
  '',
  'event: content_block_delta',
  'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}',
  '',
  'event: content_block_delta',
  'data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}',
  '',
  'event: content_block_stop',
  'data: {"type": "content_block_stop", "index": 0}',
  '',
  'event: message_delta',
  'data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence":null}, "usage": {"output_tokens": 15}}',
  '',
  'event: message_stop',
  'data: {"type": "message_stop"}',
  '',
  '',
].join('\n');

/**
 * A recorded tool-use stream of a current API version (claude-haiku-4-5): message_start's usage has the
 * cache fields, `cache_creation` by TTL and `service_tier`; the final message_delta repeats the input
 * fields next to the cumulative `output_tokens`.
 */
export const ANTHROPIC_STREAM_TOOL = [
  'event: message_start',
  'data: {"type":"message_start","message":{"model":"claude-haiku-4-5-20251001","id":"msg_01K2JbSUMYhez5RHoK9ZCj9U","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":849,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":10,"service_tier":"standard"}}}',
  '',
  'event: content_block_start',
  'data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01KFbKqPYSuAKujiL6mTfzYA","name":"json","input":{}}}',
  '',
  'event: content_block_delta',
  'data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}',
  '',
  'event: ping',
  'data: {"type":"ping"}',
  '',
  'event: content_block_delta',
  'data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"elements\\": [{\\"location\\": \\"San Francisco\\", \\"temperature\\": 58, \\"condition\\": \\"sunny\\"}]"}}',
  '',
  'event: content_block_delta',
  'data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"}"}}',
  '',
  'event: content_block_stop',
  'data: {"type":"content_block_stop","index":0}',
  '',
  'event: message_delta',
  'data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":849,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":47}}',
  '',
  'event: message_stop',
  'data: {"type":"message_stop"}',
  '',
  '',
].join('\n');

/** An `error` event in the middle of a stream (the streaming guide: e.g. `overloaded_error`). */
export const ANTHROPIC_STREAM_ERROR_EVENT =
  'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n';

/** Anthropic's error body (API reference "Errors"): a top-level `type: "error"` and `error.{type, message}`. */
export const anthropicErrorBody = (type: string, message: string) => ({
  type: 'error',
  error: { type, message },
});
