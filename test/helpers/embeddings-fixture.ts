/**
 * The example exchange of OpenAI's API reference for `POST /v1/embeddings` ("Create embeddings"), as
 * published: the request, and the answer it documents (the reference elides the middle of the
 * 1,536-float vector; the fake upstream answers with the floats it shows). The fake upstream's
 * `/embeddings` route answers in this shape: one `embedding` object per input, in input order, the
 * vector as floats or, with `encoding_format: "base64"`, as the base64 of its little-endian float32
 * bytes (what OpenAI sends, and what the openai SDK asks for by default and decodes).
 */
export const OPENAI_EMBEDDINGS_REQUEST = {
  input: 'The food was delicious and the waiter...',
  model: 'text-embedding-ada-002',
  encoding_format: 'float',
} as const;

export const OPENAI_EMBEDDINGS_RESPONSE = {
  object: 'list',
  data: [
    {
      object: 'embedding',
      embedding: [0.0023064255, -0.009327292, -0.0028842222],
      index: 0,
    },
  ],
  model: 'text-embedding-ada-002',
  usage: {
    prompt_tokens: 8,
    total_tokens: 8,
  },
} as const;

/** A vector as OpenAI's `encoding_format: "base64"` sends it: little-endian float32 bytes in base64. */
export function base64Embedding(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString('base64');
}
