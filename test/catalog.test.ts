import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startTestApp, type TestApp } from './helpers/app.js';

/** A DEFAULT paywall as the request path sees it (the built-in provider never applies). */
const ref = (id: string) => ({ id, mode: 'DEFAULT' as const, markupPpm: 1_000_000n });

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const SET = `mutation($input: SetModelPricingInput!) {
  setModelPricing(input: $input) {
    id object name display_name displayName description maxCompletionTokens createdAt updatedAt
    pricing { prompt completion request } costPricing { prompt completion request }
  }
}`;
const REMOVE = `mutation($id: String!, $pw: ID) { removeModelPricing(modelId: $id, paywallId: $pw) }`;

/** Waits until `check` passes (for changes that arrive through NOTIFY); fails after 10 s. */
async function eventually(check: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

describe('model catalogue and prices', () => {
  it('lists end-user prices (tokens x markup, request as is) on GET /v1/models and in the openai SDK', async () => {
    const pw = await t.createPaywall('DEFAULT', 'Acme AI');
    const markup = await t.gql(pw.apiKey, `mutation { updatePaywall(input: {markup: "1.5"}) { markup } }`);
    expect(markup.data.updatePaywall.markup).toBe('1.5');
    const r = await t.gql(pw.apiKey, SET, {
      input: {
        modelId: 'gpt-4o-mini',
        displayName: 'GPT-4o mini',
        description: 'Small and fast',
        request: '0.001',
        prompt: '0.000002',
        completion: '0.000005',
        maxCompletionTokens: 8192,
      },
    });
    expect(r.errors).toBeUndefined();
    expect(r.data.setModelPricing).toEqual({
      id: 'gpt-4o-mini',
      object: 'model',
      name: 'GPT-4o mini',
      display_name: 'GPT-4o mini',
      displayName: 'GPT-4o mini',
      description: 'Small and fast',
      maxCompletionTokens: 8192,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      pricing: { prompt: '0.000003', completion: '0.0000075', request: '0.001' },
      costPricing: { prompt: '0.000002', completion: '0.000005', request: '0.001' },
    });
    // A second model with defaults: no display name, no prices given → 0, shown as "0".
    await t.gql(pw.apiKey, SET, { input: { modelId: 'meta-llama/llama-3.1-8b', prompt: '0.0000001' } });

    const list = await t.rest('GET', '/v1/models', { token: pw.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.object).toBe('list');
    expect(list.body.data).toEqual([
      {
        id: 'gpt-4o-mini',
        object: 'model',
        created: expect.any(Number),
        owned_by: 'Acme AI',
        name: 'GPT-4o mini',
        display_name: 'GPT-4o mini',
        description: 'Small and fast',
        pricing: {
          prompt: '0.000003',
          completion: '0.0000075',
          request: '0.001',
          input_cache_read: '0.000003',
          input_cache_write: '0.000003',
          internal_reasoning: '0.0000075',
          audio_prompt: '0.000003',
          audio_completion: '0.0000075',
          image_prompt: '0.000003',
          image_completion: '0.0000075',
          image: [],
          audio_second: null,
          characters_1k: null,
        },
      },
      {
        id: 'meta-llama/llama-3.1-8b',
        object: 'model',
        created: expect.any(Number),
        owned_by: 'Acme AI',
        name: 'meta-llama/llama-3.1-8b',
        display_name: 'meta-llama/llama-3.1-8b',
        description: '',
        pricing: {
          prompt: '0.00000015',
          completion: '0',
          request: '0',
          input_cache_read: '0.00000015',
          input_cache_write: '0.00000015',
          internal_reasoning: '0',
          audio_prompt: '0.00000015',
          audio_completion: '0',
          image_prompt: '0.00000015',
          image_completion: '0',
          image: [],
          audio_second: null,
          characters_1k: null,
        },
      },
    ]);
    expect(Math.abs(list.body.data[0].created - Date.now() / 1000)).toBeLessThan(3600);

    const client = new OpenAI({ apiKey: pw.apiKey, baseURL: t.url + '/v1' });
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toEqual(['gpt-4o-mini', 'meta-llama/llama-3.1-8b']);
    const one = await client.models.retrieve('meta-llama/llama-3.1-8b');
    expect(one).toMatchObject({ id: 'meta-llama/llama-3.1-8b', object: 'model', owned_by: 'Acme AI' });

    // Anthropic's SDK (it sends anthropic-version) reads the same list as its own page and model objects.
    const claude = new Anthropic({ apiKey: pw.apiKey, baseURL: t.url, maxRetries: 0 });
    const page = await claude.models.list();
    expect(page.data.map((m) => [m.type, m.id, typeof m.created_at, m.display_name])).toEqual([
      ['model', 'gpt-4o-mini', 'string', list.body.data[0].display_name],
      ['model', 'meta-llama/llama-3.1-8b', 'string', list.body.data[1].display_name],
    ]);
    expect(page.has_more).toBe(false);
    expect(new Date(page.data[0].created_at).getTime() / 1000).toBe(list.body.data[0].created);
    expect(await claude.models.retrieve('gpt-4o-mini')).toMatchObject({ type: 'model', id: 'gpt-4o-mini' });
    // Other clients get OpenAI's list unchanged.
    expect(Object.keys(list.body)).toEqual(['object', 'data']);

    // The same through GraphQL, with the paywall id from an owner token.
    const gql = await t.gql(
      t.ownerToken,
      `query($pw: ID) { models(paywallId: $pw) { id pricing { prompt completion request } } }`,
      { pw: pw.id },
    );
    expect(gql.data.models[0]).toEqual({
      id: 'gpt-4o-mini',
      pricing: { prompt: '0.000003', completion: '0.0000075', request: '0.001' },
    });
  });

  it('getPrice returns exact pico values and sees every change at once', async () => {
    const pw = await t.createPaywall();
    const catalog = t.app.services.modelPrices;
    // Warm the cache with a negative answer first: it must not hide the model set next.
    expect(await catalog.getPrice(ref(pw.id), 'm1')).toBeNull();
    await t.gql(pw.apiKey, SET, {
      input: { modelId: 'm1', request: '0.001', prompt: '0.000002', completion: '0.000005' },
    });
    expect(await catalog.getPrice(ref(pw.id), 'm1')).toEqual({
      modelId: 'm1',
      promptPico: 2_000_000n,
      completionPico: 5_000_000n,
      requestPico: 1_000_000_000n,
      cacheReadPico: null,
      cacheWritePico: null,
      audioPromptPico: null,
      reasoningPico: null,
      audioCompletionPico: null,
      imagePromptPico: null,
      imageCompletionPico: null,
      imagePrices: [],
      audioSecondPico: null,
      characters1kPico: null,
      maxCompletionTokens: null,
      reasoningModel: null,
      providerCost: null,
      provider: null,
      upstreamModel: null,
      fallbacks: [],
      dailyRequestLimit: null,
      displayName: null,
      description: null,
      createdAt: expect.any(Date),
      updatedAt: expect.any(Date),
    });

    // Partial update: only the given fields change.
    const upd = await t.gql(pw.apiKey, SET, {
      input: { modelId: 'm1', prompt: '0.000000000001', maxCompletionTokens: 16, displayName: 'Model one' },
    });
    expect(upd.data.setModelPricing.costPricing).toEqual({
      prompt: '0.000000000001',
      completion: '0.000005',
      request: '0.001',
    });
    expect(await catalog.getPrice(ref(pw.id), 'm1')).toMatchObject({
      promptPico: 1n,
      completionPico: 5_000_000n,
      requestPico: 1_000_000_000n,
      maxCompletionTokens: 16,
    });
    // null clears the optional fields.
    const cleared = await t.gql(pw.apiKey, SET, {
      input: { modelId: 'm1', maxCompletionTokens: null, displayName: null },
    });
    // null clears the owner's cap: the value in force is then the default (an id the catalogue does not know)
    expect(cleared.data.setModelPricing).toMatchObject({ name: 'm1', maxCompletionTokens: 4096 });
    expect((await catalog.getPrice(ref(pw.id), 'm1'))!.maxCompletionTokens).toBeNull();

    const removed = await t.gql(pw.apiKey, REMOVE, { id: 'm1' });
    expect(removed.data.removeModelPricing).toBe(true);
    expect(await catalog.getPrice(ref(pw.id), 'm1')).toBeNull();
    const again = await t.gql(pw.apiKey, REMOVE, { id: 'm1' });
    expect(again.data.removeModelPricing).toBe(false);
    expect((await t.rest('GET', '/v1/models', { token: pw.apiKey })).body).toEqual({
      object: 'list',
      data: [],
    });
    // Pricing changes record no events.
    expect(await t.db.query('select type from event where paywall_id = $1', [pw.id])).toEqual([]);
  });

  it('picks up price changes announced by another instance (NOTIFY catalog_changed)', async () => {
    const pw = await t.createPaywall();
    await t.gql(pw.apiKey, SET, { input: { modelId: 'shared', prompt: '0.000001' } });
    expect((await t.app.services.modelPrices.getPrice(ref(pw.id), 'shared'))!.promptPico).toBe(1_000_000n);
    await t.db.query(`update model_price set prompt_pico = 7 where paywall_id = $1`, [pw.id]);
    await t.db.query(`select pg_notify('catalog_changed', $1)`, [pw.id]);
    await eventually(async () => {
      expect((await t.app.services.modelPrices.getPrice(ref(pw.id), 'shared'))!.promptPico).toBe(7n);
    });
  });

  it('GET /v1/models/{id}: the model, or 404 model_not_found', async () => {
    const pw = await t.createPaywall();
    await t.gql(pw.apiKey, SET, { input: { modelId: 'openai/gpt-4o@2024-08-06', completion: '0.00001' } });
    const ok = await t.rest('GET', '/v1/models/openai/gpt-4o@2024-08-06', { token: pw.apiKey });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      id: 'openai/gpt-4o@2024-08-06',
      object: 'model',
      pricing: { prompt: '0', completion: '0.00001', request: '0' },
    });
    const missing = await t.rest('GET', '/v1/models/x', { token: pw.apiKey });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({
      error: {
        message: expect.stringContaining('`x`'),
        type: 'not_found_error',
        param: 'model',
        code: 'model_not_found',
      },
    });
    const gql = await t.gql(pw.apiKey, `{ model(id: "x") { id } }`);
    expect(gql.errors?.[0].extensions).toMatchObject({ code: 'NOT_FOUND', errorCode: 'model_not_found' });
    expect((await t.rest('GET', '/v1/models', {})).status).toBe(401);
  });

  it('refuses bad prices, model ids and caps with BAD_USER_INPUT naming the field, changing nothing', async () => {
    const pw = await t.createPaywall();
    await t.gql(pw.apiKey, SET, { input: { modelId: 'keep', prompt: '0.000002' } });
    const bad: [Record<string, unknown>, string][] = [
      [{ prompt: '-1' }, 'prompt'],
      [{ prompt: 'abc' }, 'prompt'],
      [{ completion: '1e-6' }, 'completion'],
      [{ completion: '0.0000000000001' }, 'completion'],
      [{ request: '1000.000000000001' }, 'request'],
      [{ request: ' 0.1' }, 'request'],
      [{ request: '.5' }, 'request'],
      [{ maxCompletionTokens: 15 }, 'maxCompletionTokens'],
      [{ maxCompletionTokens: 1_000_001 }, 'maxCompletionTokens'],
      [{ displayName: 'x'.repeat(201) }, 'displayName'],
    ];
    for (const [fields, param] of bad) {
      const r = await t.gql(pw.apiKey, SET, { input: { modelId: 'keep', ...fields } });
      expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param });
    }
    for (const modelId of ['', 'has space', 'x'.repeat(201), 'émoji', 'a?b']) {
      const r = await t.gql(pw.apiKey, SET, { input: { modelId, prompt: '0.1' } });
      expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'modelId' });
    }
    // The boundaries themselves are accepted.
    const edge = await t.gql(pw.apiKey, SET, {
      input: {
        modelId: 'edge',
        prompt: '1000',
        completion: '0.000000000001',
        request: '0',
        maxCompletionTokens: 1_000_000,
      },
    });
    expect(edge.data.setModelPricing.costPricing).toEqual({
      prompt: '1000',
      completion: '0.000000000001',
      request: '0',
    });
    // A number where a decimal string is expected is refused by GraphQL itself.
    const num = await t.gql(
      pw.apiKey,
      `mutation { setModelPricing(input: {modelId: "keep", prompt: 0.1}) { id } }`,
    );
    expect(num.status).toBe(400);
    expect(await t.app.services.modelPrices.getPrice(ref(pw.id), 'keep')).toMatchObject({
      promptPico: 2_000_000n,
      completionPico: 0n,
      requestPico: 0n,
      maxCompletionTokens: null,
    });
  });

  it('maxCompletionTokens shows the value in force and where it comes from; reasoningModel the owner’s word, else the catalogue’s (§20, §21)', async () => {
    const pw = await t.createPaywall();
    const Q = `mutation($input: SetModelPricingInput!) {
      setModelPricing(input: $input) { id maxCompletionTokens maxCompletionTokensSource reasoningModel }
    }`;
    const set = async (input: Record<string, unknown>) => {
      const r = await t.gql(pw.apiKey, Q, { input });
      expect(r.errors).toBeUndefined();
      return r.data.setModelPricing;
    };
    // models.dev's catalogue: gpt-4o answers at most 16,384 tokens; o3 100,000 and reasons.
    expect(await set({ modelId: 'gpt-4o', prompt: '0.000001' })).toEqual({
      id: 'gpt-4o',
      maxCompletionTokens: 16384,
      maxCompletionTokensSource: 'CATALOGUE',
      reasoningModel: false,
    });
    expect(await set({ modelId: 'my-o3', upstreamModel: 'openai/o3-2025-04-16' })).toEqual({
      id: 'my-o3',
      maxCompletionTokens: 100000,
      maxCompletionTokensSource: 'CATALOGUE',
      reasoningModel: true,
    });
    // A model newer than models.dev's pinned data: Claude Sonnet 4.5 answers at most 64,000 tokens
    // (Anthropic's models overview), from the second catalogue, with or without its date suffix.
    expect(await set({ modelId: 'claude-sonnet-4-5' })).toEqual({
      id: 'claude-sonnet-4-5',
      maxCompletionTokens: 64000,
      maxCompletionTokensSource: 'CATALOGUE',
      reasoningModel: false,
    });
    expect(await set({ modelId: 'sonnet', upstreamModel: 'claude-sonnet-4-5-20250929' })).toMatchObject({
      maxCompletionTokens: 64000,
      maxCompletionTokensSource: 'CATALOGUE',
    });
    // An id neither catalogue knows keeps the 4,096 default.
    expect(await set({ modelId: 'claude-sonnet-9-9' })).toMatchObject({
      maxCompletionTokens: 4096,
      maxCompletionTokensSource: 'DEFAULT',
    });
    expect(await set({ modelId: 'gpt-4o', maxCompletionTokens: 2000, reasoningModel: true })).toEqual({
      id: 'gpt-4o',
      maxCompletionTokens: 2000,
      maxCompletionTokensSource: 'PRICING',
      reasoningModel: true,
    });
    expect(await set({ modelId: 'house-model-7' })).toEqual({
      id: 'house-model-7',
      maxCompletionTokens: 4096,
      maxCompletionTokensSource: 'DEFAULT',
      reasoningModel: false,
    });
    // Omitted keeps the owner's word; null hands it back to the catalogue.
    expect((await set({ modelId: 'gpt-4o', prompt: '0.000002' })).reasoningModel).toBe(true);
    expect(
      (await set({ modelId: 'gpt-4o', reasoningModel: null, maxCompletionTokens: null })).reasoningModel,
    ).toBe(false);
  });

  it('reasoning: true / false marks whether the model reasons (as reasoningModel) and keeps its price; a string is the reasoning price', async () => {
    const pw = await t.createPaywall();
    const Q = `mutation($input: SetModelPricingInput!) {
      setModelPricing(input: $input) { id reasoningModel pricing { completion reasoning } }
    }`;
    const set = (input: Record<string, unknown>) => t.gql(pw.apiKey, Q, { input });
    const ok = async (input: Record<string, unknown>) => {
      const r = await set(input);
      expect(r.errors).toBeUndefined();
      return r.data.setModelPricing;
    };
    expect(await ok({ modelId: 'house-thinker', completion: '0.00001', reasoning: true })).toEqual({
      id: 'house-thinker',
      reasoningModel: true,
      pricing: { completion: '0.00001', reasoning: '0.00001' },
    });
    expect(await ok({ modelId: 'house-thinker', reasoning: '0.00003' })).toEqual({
      id: 'house-thinker',
      reasoningModel: true,
      pricing: { completion: '0.00001', reasoning: '0.00003' },
    });
    // The flag leaves the price as it is.
    expect(await ok({ modelId: 'house-thinker', reasoning: false })).toEqual({
      id: 'house-thinker',
      reasoningModel: false,
      pricing: { completion: '0.00001', reasoning: '0.00003' },
    });
    // Written inline, too.
    const inline = await t.gql(
      pw.apiKey,
      `mutation { setModelPricing(input: {modelId: "house-thinker", reasoning: true}) { reasoningModel } }`,
    );
    expect(inline.data?.setModelPricing).toEqual({ reasoningModel: true });
    // Both fields, disagreeing: refused, nothing changed.
    const both = await set({ modelId: 'house-thinker', reasoning: false, reasoningModel: true });
    expect(both.errors?.[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT', param: 'reasoning' },
    });
    expect((await ok({ modelId: 'house-thinker' })).reasoningModel).toBe(true);
    // Who says so: the owner (PRICING), the catalogue of known models (o3 reasons, gpt-4o does not), or
    // neither (DEFAULT: it does not).
    await ok({ modelId: 'my-o3', upstreamModel: 'o3' });
    await ok({ modelId: 'gpt-4o' });
    await ok({ modelId: 'house-plain' });
    const sources = await t.gql(pw.apiKey, `{ models { id reasoningModel reasoningModelSource } }`);
    expect(sources.data.models).toEqual(
      expect.arrayContaining([
        { id: 'house-thinker', reasoningModel: true, reasoningModelSource: 'PRICING' },
        { id: 'my-o3', reasoningModel: true, reasoningModelSource: 'CATALOGUE' },
        { id: 'gpt-4o', reasoningModel: false, reasoningModelSource: 'CATALOGUE' },
        { id: 'house-plain', reasoningModel: false, reasoningModelSource: 'DEFAULT' },
      ]),
    );
    // Neither a price nor a flag.
    const bad = await set({ modelId: 'house-thinker', reasoning: 5 });
    expect(bad.errors?.[0]?.message).toContain('expected a USDC decimal string (a price) or true / false');
  });

  it("cannot see or change another paywall's models", async () => {
    const mine = await t.createPaywall();
    const other = await t.app.services.owners.create('other owner');
    const theirs = await t.gql(
      other.createdToken,
      `mutation { createPaywall(input: {name: "Theirs", mode: DEFAULT}) { apiKey paywall { id } } }`,
    );
    const theirId = theirs.data.createPaywall.paywall.id;
    const theirKey = theirs.data.createPaywall.apiKey;
    await t.gql(theirKey, SET, { input: { modelId: 'secret-model', prompt: '0.5' } });

    expect((await t.rest('GET', '/v1/models', { token: mine.apiKey })).body.data).toEqual([]);
    expect((await t.rest('GET', '/v1/models/secret-model', { token: mine.apiKey })).status).toBe(404);
    for (const token of [t.ownerToken, mine.apiKey]) {
      const list = await t.gql(token, `query($pw: ID) { models(paywallId: $pw) { id } }`, { pw: theirId });
      expect(list.errors?.[0].extensions.code).toBe('NOT_FOUND');
      const set = await t.gql(token, SET, {
        input: { paywallId: theirId, modelId: 'secret-model', prompt: '0' },
      });
      expect(set.errors?.[0].extensions.code).toBe('NOT_FOUND');
      const rm = await t.gql(token, REMOVE, { id: 'secret-model', pw: theirId });
      expect(rm.errors?.[0].extensions.code).toBe('NOT_FOUND');
    }
    expect(await t.app.services.modelPrices.getPrice(ref(theirId), 'secret-model')).toMatchObject({
      promptPico: 500_000_000_000n,
    });
    expect(await t.app.services.modelPrices.getPrice(ref(mine.id), 'secret-model')).toBeNull();
    // An owner token must name the paywall.
    const noId = await t.gql(t.ownerToken, `{ models { id } }`);
    expect(noId.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'paywallId' });
  });
});
