import { FakeUpstream } from './fake-upstream.js';

/**
 * `npm run fake-providers`: the model providers the tests use, on http://127.0.0.1:12112/v1
 * (FAKE_PROVIDERS_PORT), for trying the service without provider accounts. One server answers both kinds:
 * OpenAI-compatible (POST /v1/chat/completions, /v1/responses, /v1/embeddings, and the image and audio
 * routes /v1/images/generations, /edits, /v1/audio/transcriptions, /translations, /speech) and Anthropic (POST
 * /v1/messages, /v1/messages/count_tokens), in JSON or SSE, with realistic usage. Any key is accepted.
 * Connect it with PROVIDER_ALLOW_PRIVATE_NETWORKS=true (it is on loopback). Development only.
 */
const USAGE = `Usage: npm run fake-providers  (node dist/test/helpers/fake-providers-cli.js)

The model providers of the tests, on http://127.0.0.1:$FAKE_PROVIDERS_PORT/v1 (default 12112), for
trying the service without provider accounts. Any key is accepted. Development only.

  OpenAI-compatible: POST /v1/chat/completions, /v1/responses, /v1/embeddings,
                     /v1/images/generations, /v1/images/edits,
                     /v1/audio/transcriptions, /v1/audio/translations, /v1/audio/speech
  Anthropic:         POST /v1/messages, /v1/messages/count_tokens

Connect it with connectProvider(input: {baseUrl: "http://127.0.0.1:12112/v1", apiKey: "any"})
(kind ANTHROPIC for the Messages API) and start the service with PROVIDER_ALLOW_PRIVATE_NETWORKS=true.

Environment: FAKE_PROVIDERS_PORT (default 12112).`;

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    console.log(USAGE);
    return;
  }
  const port = Number(process.env.FAKE_PROVIDERS_PORT ?? 12112);
  const fake = await FakeUpstream.start({ port, record: false });
  fake.onRequest = (url, body) =>
    console.log(`${url} model=${body?.model ?? '?'}${body?.stream ? ' stream' : ''}`);
  console.log(`fake providers on ${fake.baseUrl}`);
  console.log(`  OpenAI-compatible: POST ${fake.baseUrl}/chat/completions, /responses, /embeddings`);
  console.log(`  Anthropic:         POST ${fake.baseUrl}/messages, /messages/count_tokens`);
  console.log(`  Images and audio:  POST ${fake.baseUrl}/images/generations, /images/edits,`);
  console.log(`                     /audio/transcriptions, /audio/translations, /audio/speech`);
  const stop = () => void fake.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
