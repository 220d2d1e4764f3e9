import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { ModelRowFragment } from '../gql/graphql';
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
  fragment ModelRow on Model {
    id
    displayName
    description
    pricing {
      prompt
      completion
      request
    }
    costPricing {
      prompt
      completion
      request
    }
    maxCompletionTokens
    dailyRequestLimit
    builtinProvider
  }
`);
const MODELS = graphql(`
  query Models($id: ID) {
    paywall(id: $id) {
      id
      markup
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

/** A column of per-token prices shown per million tokens (the exact price on hover); bold: an end-user price. */
const perToken = (head: string, value: (m: Model) => string, bold = false): Column<Model> => ({
  head,
  num: true,
  title: (m) => `${value(m)} USDC per token`,
  cell: (m) => (bold ? <strong>{perMillion(value(m))}</strong> : perMillion(value(m))),
});

const blank = {
  modelId: '',
  displayName: '',
  prompt: '',
  completion: '',
  request: '',
  maxCompletionTokens: '',
};

export function ModelsPage({ paywall }: { paywall: PaywallSummary }) {
  const [{ data, fetching, error }, refetch] = useQuery({
    query: MODELS,
    variables: { id: paywall.id },
  });
  const { values: f, setValues: setF, set } = useForm(blank);
  const [saved, setSaved] = useState<string | null>(null);
  const [setState, setPrice] = useMutation(SET);
  const [removeState, remove] = useMutation(REMOVE);
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
                  {m.builtinProvider && <Badge tone="info">built-in</Badge>}
                </>
              ),
            },
            perToken('Prompt cost', (m) => m.costPricing.prompt),
            perToken('Prompt price', (m) => m.pricing.prompt, true),
            perToken('Completion cost', (m) => m.costPricing.completion),
            perToken('Completion price', (m) => m.pricing.completion, true),
            { head: 'Per request', num: true, cell: (m) => m.pricing.request },
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
                {
                  name: 'maxCompletionTokens',
                  label: 'Max completion tokens',
                  inputMode: 'numeric',
                  placeholder: '4096',
                },
              ],
            ]}
          />
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
