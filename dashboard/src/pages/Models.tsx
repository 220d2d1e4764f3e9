import { Fragment, useId, useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { ModelRowFragment, ModelsQuery, PriceListFragment, ProviderKind } from '../gql/graphql';
import type { PaywallSummary } from '../session';
import {
  Badge,
  Button,
  Card,
  DataTable,
  ErrorBanner,
  FormFields,
  Notice,
  PageHeader,
  useForm,
  type Column,
} from '../ui';

type Model = ModelRowFragment;
graphql(`
  fragment PriceList on ModelPricing {
    prompt
    completion
    request
    cacheRead
    cacheWrite
    audioPrompt
    reasoning
    audioCompletion
    imagePrompt
    imageCompletion
    image {
      size
      quality
      price
    }
    audioSecond
    characters1k
  }
`);
graphql(`
  fragment ModelRow on Model {
    id
    displayName
    description
    pricing {
      ...PriceList
    }
    costPricing {
      ...PriceList
    }
    maxCompletionTokens
    maxCompletionTokensSource
    reasoningModel
    reasoningModelSource
    dailyRequestLimit
    builtinProvider
    provider
    upstreamModel
    fallbacks
  }
`);
const MODELS = graphql(`
  query Models($id: ID) {
    paywall(id: $id) {
      id
      markup
      providers {
        name
        kind
        builtin
      }
    }
    models(paywallId: $id) {
      ...ModelRow
    }
  }
`);
const SET = graphql(`
  mutation SetPrice($input: SetModelPricingInput!) {
    setModelPricing(input: $input) {
      ...ModelRow
    }
  }
`);
const REMOVE = graphql(`
  mutation RemovePrice($id: ID, $modelId: String!) {
    removeModelPricing(paywallId: $id, modelId: $modelId)
  }
`);

/** Per-token prices read better per million tokens: "0.000002" → "2.00". */
const perMillion = (perToken: string) => {
  const n = Number(perToken) * 1e6;
  return n.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 6 });
};

/**
 * The usage buckets that can have prices of their own (docs/reference.md §13): the form field, its label,
 * the price it follows when it has none (prompt for the input buckets, completion for the output ones),
 * and its short name in the table.
 */
const BUCKETS = [
  ['cacheRead', 'Cached input', 'prompt', 'cached'],
  ['cacheWrite', 'Cache write', 'prompt', 'cache write'],
  ['audioPrompt', 'Audio input', 'prompt', 'audio in'],
  ['reasoning', 'Reasoning', 'completion', 'reasoning'],
  ['audioCompletion', 'Audio output', 'completion', 'audio out'],
  ['imagePrompt', 'Image input', 'prompt', 'image in'],
  ['imageCompletion', 'Image output', 'completion', 'image out'],
] as const;

/** Prices per image as the form edits them: "1024x1024 hd 0.08; * * 0.2" (size, quality, USDC). */
const imagePricesText = (list: PriceListFragment['image']) =>
  list.map((p) => `${p.size} ${p.quality} ${p.price}`).join('; ');
/** The form's text back to the list; a malformed entry is sent as it is, for the API to name. */
const imagePricesOf = (text: string) =>
  text
    .split(/[;\n]/)
    .map((e) => e.trim())
    .filter(Boolean)
    .map((e) => {
      const [size = '', quality = '', price = ''] = e.split(/\s+/);
      return { size, quality, price };
    });

/**
 * docs/reference.md §22: a model's prices per unit, end-user or cost: per image by size and quality,
 * per second of audio, per 1,000 characters ("—" when none).
 */
const unitPrices = (p: PriceListFragment) => {
  const parts = [
    ...p.image.map((i) => `${i.size} ${i.quality}: ${i.price}/image`),
    ...(p.audioSecond !== null && p.audioSecond !== undefined ? [`${p.audioSecond}/s of audio`] : []),
    ...(p.characters1k !== null && p.characters1k !== undefined ? [`${p.characters1k}/1k chars`] : []),
  ];
  return parts.length ? parts.map((t) => <div key={t}>{t}</div>) : <span className="muted">—</span>;
};
type BucketField = (typeof BUCKETS)[number][0];
type Side = 'prompt' | 'completion';

/**
 * A bucket's price of its own, '' when it follows. The API gives prices resolved, so a price equal to the
 * one it follows reads as following (an empty field; saved so, it follows again and charges the same).
 */
const ownPrice = (p: PriceListFragment, b: BucketField, follows: Side) => (p[b] === p[follows] ? '' : p[b]);

/**
 * A column of per-token prices of one side (prompt or completion), shown per million tokens (exact on
 * hover); below the price, the side's buckets priced apart. Bold: end-user prices.
 */
const perToken = (
  head: string,
  side: Side,
  prices: (m: Model) => PriceListFragment,
  bold = false,
): Column<Model> => {
  const figure = (v: string) => (bold ? <strong>{perMillion(v)}</strong> : perMillion(v));
  const own = (m: Model) =>
    BUCKETS.filter(([b, , follows]) => follows === side && ownPrice(m.costPricing, b, side));
  return {
    head,
    num: true,
    title: (m) =>
      [`${prices(m)[side]} USDC per token`, ...own(m).map(([b, label]) => `${label}: ${prices(m)[b]}`)].join(
        '\n',
      ),
    cell: (m) => (
      <>
        {figure(prices(m)[side])}
        {own(m).map(([b, , , short]) => (
          <div key={b} className="bucket-price">
            <span className="muted">{short}</span> {figure(prices(m)[b])}
          </div>
        ))}
      </>
    ),
  };
};

const blank = {
  modelId: '',
  displayName: '',
  prompt: '',
  completion: '',
  request: '',
  maxCompletionTokens: '',
  // '' : the catalogue of known models decides; 'true' / 'false': the owner's word.
  reasoningModel: '',
  cacheRead: '',
  cacheWrite: '',
  audioPrompt: '',
  reasoning: '',
  audioCompletion: '',
  imagePrompt: '',
  imageCompletion: '',
  imagePrices: '',
  audioSecond: '',
  characters1k: '',
  provider: 'default',
  upstreamModel: '',
  fallbacks: '',
};

const KIND_LABELS: Record<ProviderKind, string> = { OPENAI: 'OpenAI-compatible', ANTHROPIC: 'Anthropic' };
type ProviderName = ModelsQuery['paywall']['providers'][number];

/** "claude, default" → ["claude", "default"]. */
const names = (list: string) =>
  list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

const routeTitle = (m: Model) =>
  [
    `Served by ${m.provider} as ${m.upstreamModel}`,
    m.fallbacks.length ? `If it fails before answering: ${m.fallbacks.join(', then ')}` : '',
  ]
    .filter(Boolean)
    .join('\n');

/**
 * Where a model's requests go (docs/reference.md §15 "Routing", "Fallbacks"): its provider, then its
 * fallbacks in order ("claude → default"); below, the model id sent upstream when it is not the model's.
 */
function Route({ m, connected }: { m: Model; connected: ReadonlySet<string> }) {
  return (
    <>
      <div className="route cell-note" title={routeTitle(m)}>
        via <span className="mono">{m.provider}</span>
        {m.fallbacks.map((f) => (
          <Fragment key={f}>
            <span className="arrow"> → </span>
            <span className="mono">{f}</span>
          </Fragment>
        ))}
      </div>
      {m.upstreamModel !== m.id && (
        <div className="cell-note upstream">
          as <span className="mono">{m.upstreamModel}</span>
        </div>
      )}
      {!connected.has(m.provider) && <Badge tone="warn">{m.provider} not connected</Badge>}
    </>
  );
}

export function ModelsPage({ paywall }: { paywall: PaywallSummary }) {
  const [{ data, fetching, error }, refetch] = useQuery({
    query: MODELS,
    variables: { id: paywall.id },
  });
  const { values: f, setValues: setF, set } = useForm(blank);
  const [saved, setSaved] = useState<string | null>(null);
  const [setState, setPrice] = useMutation(SET);
  const [removeState, remove] = useMutation(REMOVE);
  const bucketsId = useId();
  const providers: readonly ProviderName[] = data?.paywall.providers ?? [];
  const connected = new Set(providers.map((p) => p.name));
  const builtin = providers.some((p) => p.builtin);
  // The paywall's providers; `default` (what a model uses unless told) and the edited model's own even
  // when not connected (a model may name a provider connected later).
  const providerOptions = [
    ...providers.map((p) => ({
      value: p.name,
      label: `${p.name} · ${p.builtin ? 'Built-in (platform)' : KIND_LABELS[p.kind]}`,
    })),
    ...[...new Set(['default', f.provider])]
      .filter((n) => n && !connected.has(n))
      .map((n) => ({
        value: n,
        label:
          n === 'default' && builtin ? 'default (the built-in one until connected)' : `${n} (not connected)`,
      })),
  ];
  const edit = (m: Model) =>
    setF({
      modelId: m.id,
      displayName: m.displayName === m.id ? '' : m.displayName,
      prompt: m.costPricing.prompt,
      completion: m.costPricing.completion,
      request: m.costPricing.request,
      // Only the owner's own cap: a catalogue maximum or the default is not a setting to save back.
      maxCompletionTokens:
        m.maxCompletionTokensSource === 'PRICING' ? (m.maxCompletionTokens?.toString() ?? '') : '',
      reasoningModel: m.reasoningModelSource === 'PRICING' ? String(m.reasoningModel) : '',
      cacheRead: ownPrice(m.costPricing, 'cacheRead', 'prompt'),
      cacheWrite: ownPrice(m.costPricing, 'cacheWrite', 'prompt'),
      audioPrompt: ownPrice(m.costPricing, 'audioPrompt', 'prompt'),
      reasoning: ownPrice(m.costPricing, 'reasoning', 'completion'),
      audioCompletion: ownPrice(m.costPricing, 'audioCompletion', 'completion'),
      imagePrompt: ownPrice(m.costPricing, 'imagePrompt', 'prompt'),
      imageCompletion: ownPrice(m.costPricing, 'imageCompletion', 'completion'),
      imagePrices: imagePricesText(m.costPricing.image),
      audioSecond: m.costPricing.audioSecond ?? '',
      characters1k: m.costPricing.characters1k ?? '',
      provider: m.provider,
      upstreamModel: m.upstreamModel === m.id ? '' : m.upstreamModel,
      fallbacks: m.fallbacks.join(', '),
    });
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(null);
    const modelId = f.modelId.trim();
    const existing = data?.models.find((m) => m.id === modelId);
    const r = await setPrice({
      input: {
        paywallId: paywall.id,
        modelId,
        displayName: f.displayName.trim() || null,
        prompt: f.prompt.trim() || '0',
        completion: f.completion.trim() || '0',
        request: f.request.trim() || '0',
        maxCompletionTokens: f.maxCompletionTokens.trim() ? Number(f.maxCompletionTokens) : null,
        reasoningModel: f.reasoningModel === '' ? null : f.reasoningModel === 'true',
        // Empty: null, the bucket follows the prompt or completion price (again).
        cacheRead: f.cacheRead.trim() || null,
        cacheWrite: f.cacheWrite.trim() || null,
        audioPrompt: f.audioPrompt.trim() || null,
        reasoning: f.reasoning.trim() || null,
        audioCompletion: f.audioCompletion.trim() || null,
        imagePrompt: f.imagePrompt.trim() || null,
        imageCompletion: f.imageCompletion.trim() || null,
        // docs/reference.md §22: prices per unit; empty: none.
        imagePrices: imagePricesOf(f.imagePrices),
        audioSecond: f.audioSecond.trim() || null,
        characters1k: f.characters1k.trim() || null,
        // A model the built-in provider serves without a provider of its own keeps following `default`
        // (which a provider connected later takes over): its provider is sent only when changed.
        ...(existing?.builtinProvider && existing.provider === f.provider ? {} : { provider: f.provider }),
        // Empty: null, the model id goes upstream as it is.
        upstreamModel: f.upstreamModel.trim() || null,
        fallbacks: names(f.fallbacks),
      },
    });
    if (r.data) {
      setSaved(`Saved ${r.data.setModelPricing.id}.`);
      setF(blank);
      refetch({ requestPolicy: 'network-only' });
    }
  };
  return (
    <div className="stack">
      <PageHeader
        title="Models & prices"
        subtitle={
          data
            ? `Your cost prices; end users pay token cost × markup ${data.paywall.markup}, plus the request price.`
            : undefined
        }
      />
      <Card title="Models" className="models-card">
        <ErrorBanner message={errorMessage(error) ?? errorMessage(removeState.error)} />
        <DataTable
          label="Model prices"
          rows={data?.models ?? []}
          rowKey={(m) => m.id}
          loading={!data && fetching}
          empty="No models priced yet: add one below."
          columns={[
            {
              head: 'Model',
              cell: (m) => (
                <>
                  <div className="mono">{m.id}</div>
                  {m.displayName !== m.id && <div className="muted">{m.displayName}</div>}
                  <Route m={m} connected={connected} />
                  {m.builtinProvider && <Badge tone="info">built-in</Badge>}
                  {m.reasoningModel && (
                    <Badge tone="info">
                      reasons{m.reasoningModelSource === 'CATALOGUE' ? ' (catalogue)' : ''}
                    </Badge>
                  )}
                </>
              ),
            },
            perToken('Prompt cost', 'prompt', (m) => m.costPricing),
            perToken('Prompt price', 'prompt', (m) => m.pricing, true),
            perToken('Completion cost', 'completion', (m) => m.costPricing),
            perToken('Completion price', 'completion', (m) => m.pricing, true),
            { head: 'Per request', num: true, cell: (m) => m.pricing.request },
            { head: 'Per unit (price)', num: true, cell: (m) => unitPrices(m.pricing) },
            {
              className: 'actions',
              cell: (m) => (
                <>
                  <Button className="btn-sm" onClick={() => edit(m)} aria-label={`Edit ${m.id}`}>
                    Edit
                  </Button>
                  <Button
                    className="btn-sm"
                    variant="danger"
                    aria-label={`Remove ${m.id}`}
                    onClick={async () => {
                      if (!confirm(`Stop selling ${m.id}?`)) return;
                      await remove({ id: paywall.id, modelId: m.id });
                      refetch({ requestPolicy: 'network-only' });
                    }}
                  >
                    Remove
                  </Button>
                </>
              ),
            },
          ]}
        >
          <p className="legend-note">
            Token prices in USDC per million tokens (hover for the per-token price); bold: what end users pay.
            Below a price: the usage buckets priced apart (the others cost what prompt or completion costs).
            Per unit: what end users pay per image (by size and quality), per second of audio and per 1,000
            characters. Below a model: the provider that serves it, then its fallbacks in order (&ldquo;via
            claude → default&rdquo;), and the model id sent to the provider when it is not the model&apos;s
            own.
          </p>
        </DataTable>
      </Card>
      <Card
        title={
          f.modelId && data?.models.some((m) => m.id === f.modelId) ? `Edit ${f.modelId}` : 'Price a model'
        }
      >
        <ErrorBanner message={errorMessage(setState.error)} />
        {saved && <Notice tone="success">{saved}</Notice>}
        <form className="stack" onSubmit={submit}>
          <FormFields
            values={f}
            set={set}
            layout={[
              [
                { name: 'modelId', label: 'Model id', placeholder: 'gpt-4o-mini', required: true },
                { name: 'displayName', label: 'Display name', placeholder: 'optional' },
              ],
              [
                {
                  name: 'prompt',
                  label: 'Prompt cost per token (USDC)',
                  inputMode: 'decimal',
                  placeholder: '0.00000015',
                },
                {
                  name: 'completion',
                  label: 'Completion cost per token (USDC)',
                  inputMode: 'decimal',
                  placeholder: '0.0000006',
                },
                {
                  name: 'request',
                  label: 'Price per request (USDC)',
                  inputMode: 'decimal',
                  placeholder: '0',
                },
              ],
              [
                {
                  name: 'provider',
                  label: 'Provider',
                  options: providerOptions,
                  hint: 'The provider that serves it (Settings → Providers).',
                },
                {
                  name: 'upstreamModel',
                  label: 'Upstream model',
                  placeholder: f.modelId.trim() || 'optional',
                  hint: 'The model id sent to the provider; empty: the model id.',
                },
                {
                  name: 'fallbacks',
                  label: 'Fallbacks',
                  placeholder: 'optional, e.g. backup',
                  hint: 'Provider names, comma-separated, tried in order when the provider fails (429, 5xx, unreachable); up to 5.',
                },
              ],
              [
                {
                  name: 'maxCompletionTokens',
                  label: 'Max completion tokens',
                  inputMode: 'numeric',
                  placeholder: '4096',
                  hint: 'The most output a request gets (a client’s lower cap is kept); empty: the model’s own maximum.',
                },
                {
                  name: 'reasoningModel',
                  label: 'Reasoning model',
                  options: [
                    { value: '', label: 'As the catalogue says' },
                    { value: 'true', label: 'Yes: it reasons' },
                    { value: 'false', label: 'No' },
                  ],
                  hint: 'Thinking and reasoning effort are translated between formats only for a model that reasons.',
                },
              ],
            ]}
          />
          <div className="bucket-costs" role="group" aria-labelledby={bucketsId}>
            <h3 id={bucketsId}>Usage bucket costs per token (USDC)</h3>
            <p className="hint">
              Optional: an empty field follows the prompt cost (cached input, cache write, audio input, image
              input) or the completion cost (reasoning, audio output, image output).
            </p>
            <FormFields
              values={f}
              set={set}
              layout={[
                BUCKETS.map(([name, label, follows]) => ({
                  name,
                  label,
                  inputMode: 'decimal' as const,
                  // The price it follows: what the prompt or completion field holds.
                  placeholder: f[follows].trim() || `${follows} cost`,
                })),
              ]}
            />
          </div>
          <div className="bucket-costs" role="group" aria-labelledby={`${bucketsId}-units`}>
            <h3 id={`${bucketsId}-units`}>Images and audio: costs per unit (USDC)</h3>
            <p className="hint">
              Optional. Per image by size and quality, e.g.{' '}
              <code>1024x1024 standard 0.04; 1024x1024 hd 0.08</code> (<code>*</code> matches any); per second
              of input audio (transcription); per 1,000 input characters (speech). Empty: not priced so.
            </p>
            <FormFields
              values={f}
              set={set}
              layout={[
                [
                  {
                    name: 'imagePrices',
                    label: 'Per image (size quality price; …)',
                    placeholder: '1024x1024 standard 0.04',
                  },
                  {
                    name: 'audioSecond',
                    label: 'Per second of audio',
                    inputMode: 'decimal',
                    placeholder: '0.0001',
                  },
                  {
                    name: 'characters1k',
                    label: 'Per 1,000 characters',
                    inputMode: 'decimal',
                    placeholder: '0.015',
                  },
                ],
              ]}
            />
          </div>
          <div className="row">
            <Button type="submit" variant="primary" busy={setState.fetching}>
              Save price
            </Button>
            {f !== blank && (
              <Button variant="ghost" onClick={() => setF(blank)}>
                Clear
              </Button>
            )}
          </div>
        </form>
      </Card>
    </div>
  );
}
