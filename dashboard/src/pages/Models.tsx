import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import type { PaywallSummary } from '../session';
import { Badge, Button, Card, Empty, ErrorBanner, Field, Loading, Notice, PageHeader } from '../ui';

interface Model {
  id: string;
  displayName: string;
  description: string;
  pricing: { prompt: string; completion: string; request: string };
  costPricing: { prompt: string; completion: string; request: string };
  maxCompletionTokens: number | null;
  dailyRequestLimit: number | null;
  builtinProvider: boolean;
}
const FIELDS = `id displayName description pricing { prompt completion request } costPricing { prompt completion request }
  maxCompletionTokens dailyRequestLimit builtinProvider`;
const MODELS = `query Models($id: ID) { paywall(id: $id) { id markup } models(paywallId: $id) { ${FIELDS} } }`;
const SET = `mutation SetPrice($input: SetModelPricingInput!) { setModelPricing(input: $input) { ${FIELDS} } }`;
const REMOVE = `mutation RemovePrice($id: ID, $modelId: String!) { removeModelPricing(paywallId: $id, modelId: $modelId) }`;

/** Per-token prices read better per million tokens: "0.000002" → "2.00". */
const perMillion = (perToken: string) => {
  const n = Number(perToken) * 1e6;
  return n.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 6 });
};

const blank = {
  modelId: '',
  displayName: '',
  prompt: '',
  completion: '',
  request: '',
  maxCompletionTokens: '',
};

export function ModelsPage({ paywall }: { paywall: PaywallSummary }) {
  const [{ data, fetching, error }, refetch] = useQuery<{ paywall: { markup: string }; models: Model[] }>({
    query: MODELS,
    variables: { id: paywall.id },
  });
  const [f, setF] = useState(blank);
  const [saved, setSaved] = useState<string | null>(null);
  const [setState, setPrice] = useMutation(SET);
  const [removeState, remove] = useMutation(REMOVE);
  const set = (k: keyof typeof blank) => (v: string) => setF({ ...f, [k]: v });
  const edit = (m: Model) =>
    setF({
      modelId: m.id,
      displayName: m.displayName === m.id ? '' : m.displayName,
      prompt: m.costPricing.prompt,
      completion: m.costPricing.completion,
      request: m.costPricing.request,
      maxCompletionTokens: m.maxCompletionTokens?.toString() ?? '',
    });
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(null);
    const r = await setPrice({
      input: {
        paywallId: paywall.id,
        modelId: f.modelId.trim(),
        displayName: f.displayName.trim() || null,
        prompt: f.prompt.trim() || '0',
        completion: f.completion.trim() || '0',
        request: f.request.trim() || '0',
        maxCompletionTokens: f.maxCompletionTokens.trim() ? Number(f.maxCompletionTokens) : null,
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
      <Card title="Models">
        <ErrorBanner message={errorMessage(error) ?? errorMessage(removeState.error)} />
        {!data && fetching ? (
          <Loading />
        ) : !data?.models.length ? (
          <Empty>No models priced yet: add one below.</Empty>
        ) : (
          <div className="table-wrap">
            <table aria-label="Model prices">
              <thead>
                <tr>
                  <th>Model</th>
                  <th className="num">Prompt cost</th>
                  <th className="num">Prompt price</th>
                  <th className="num">Completion cost</th>
                  <th className="num">Completion price</th>
                  <th className="num">Per request</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {data.models.map((m) => (
                  <tr key={m.id}>
                    <td>
                      <div className="mono">{m.id}</div>
                      {m.displayName !== m.id && <div className="muted">{m.displayName}</div>}
                      {m.builtinProvider && <Badge tone="info">built-in</Badge>}
                    </td>
                    <td className="num" title={`${m.costPricing.prompt} USDC per token`}>
                      {perMillion(m.costPricing.prompt)}
                    </td>
                    <td className="num" title={`${m.pricing.prompt} USDC per token`}>
                      <strong>{perMillion(m.pricing.prompt)}</strong>
                    </td>
                    <td className="num" title={`${m.costPricing.completion} USDC per token`}>
                      {perMillion(m.costPricing.completion)}
                    </td>
                    <td className="num" title={`${m.pricing.completion} USDC per token`}>
                      <strong>{perMillion(m.pricing.completion)}</strong>
                    </td>
                    <td className="num">{m.pricing.request}</td>
                    <td className="actions">
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
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            <p className="legend-note">
              Token prices in USDC per million tokens (hover for the per-token price); bold: what end users
              pay.
            </p>
          </div>
        )}
      </Card>
      <Card
        title={
          f.modelId && data?.models.some((m) => m.id === f.modelId) ? `Edit ${f.modelId}` : 'Price a model'
        }
      >
        <ErrorBanner message={errorMessage(setState.error)} />
        {saved && <Notice tone="success">{saved}</Notice>}
        <form className="stack" onSubmit={submit}>
          <div className="row">
            <Field
              label="Model id"
              value={f.modelId}
              onChange={set('modelId')}
              placeholder="gpt-4o-mini"
              required
            />
            <Field
              label="Display name"
              value={f.displayName}
              onChange={set('displayName')}
              placeholder="optional"
            />
          </div>
          <div className="row">
            <Field
              label="Prompt cost per token (USDC)"
              value={f.prompt}
              onChange={set('prompt')}
              inputMode="decimal"
              placeholder="0.00000015"
            />
            <Field
              label="Completion cost per token (USDC)"
              value={f.completion}
              onChange={set('completion')}
              inputMode="decimal"
              placeholder="0.0000006"
            />
            <Field
              label="Price per request (USDC)"
              value={f.request}
              onChange={set('request')}
              inputMode="decimal"
              placeholder="0"
            />
            <Field
              label="Max completion tokens"
              value={f.maxCompletionTokens}
              onChange={set('maxCompletionTokens')}
              inputMode="numeric"
              placeholder="4096"
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
