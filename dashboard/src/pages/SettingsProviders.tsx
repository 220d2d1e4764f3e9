import { Fragment, useEffect, useState } from 'react';
import { useMutation } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type {
  CapParameter,
  PaywallSettingsFragment,
  ProviderKind,
  ProviderRowFragment,
} from '../gql/graphql';
import { Badge, Button, Card, DataTable, ErrorBanner, FormFields, Notice, Time, useForm } from '../ui';

/** Settings → the paywall's providers: the table with each one's health, and the form that connects one. */
type Settings = PaywallSettingsFragment;
type ProviderRow = ProviderRowFragment;
graphql(`
  fragment ProviderRow on ProviderInfo {
    name
    kind
    builtin
    baseUrl
    apiKeyLastFour
    capParameter
    connectedAt
    updatedAt
    health {
      windowMinutes
      requests
      errors
      errorRate
      lastError
      lastErrorAt
    }
  }
`);
const CONNECT_PROVIDER = graphql(`
  mutation ConnectProvider($input: ConnectProviderInput!) {
    connectProvider(input: $input) {
      ...PaywallSettings
    }
  }
`);
const DISCONNECT_PROVIDER = graphql(`
  mutation DisconnectProvider($input: DisconnectProviderInput!) {
    disconnectProvider(input: $input) {
      ...PaywallSettings
    }
  }
`);

/** The cap field a chat request gets when the client sent none (docs/reference.md §13). */
const CAP_FIELDS: { value: CapParameter; label: string }[] = [
  { value: 'MAX_COMPLETION_TOKENS', label: 'max_completion_tokens (OpenAI; default)' },
  { value: 'MAX_TOKENS', label: 'max_tokens (older servers)' },
];
const capFieldName = (c: CapParameter) => (c === 'MAX_TOKENS' ? 'max_tokens' : 'max_completion_tokens');

/** The API a provider speaks (docs/reference.md §15 "Providers"). */
const KIND_LABELS: Record<ProviderKind, string> = { OPENAI: 'OpenAI-compatible', ANTHROPIC: 'Anthropic' };
const KINDS = (Object.keys(KIND_LABELS) as ProviderKind[]).map((value) => ({
  value,
  label: KIND_LABELS[value],
}));
/** Each kind's usual base URL: the form switches between them when the kind changes. */
const KIND_BASE_URLS: Record<ProviderKind, string> = {
  OPENAI: 'https://api.openai.com/v1',
  ANTHROPIC: 'https://api.anthropic.com/v1',
};

const BLANK_PROVIDER = {
  name: 'default',
  kind: 'OPENAI' as string,
  baseUrl: KIND_BASE_URLS.OPENAI,
  apiKey: '',
  capParameter: 'MAX_COMPLETION_TOKENS' as string,
};

/** "3 errors of 40 in 5 min (7.5%)"; "No requests in 5 min". */
function healthSummary(h: ProviderRow['health']): string {
  if (h.requests === 0) return `No requests in ${h.windowMinutes} min`;
  const rate = (h.errorRate * 100).toLocaleString('en-US', { maximumFractionDigits: 1 });
  return `${h.errors} ${h.errors === 1 ? 'error' : 'errors'} of ${h.requests} in ${h.windowMinutes} min (${rate}%)`;
}

/**
 * A URL that may break after its scheme and before each path segment ("https://" "api.openai.com" "/v1"),
 * never inside a host name: a narrow table wraps it there rather than cutting the row's button.
 */
function BreakableUrl({ url }: { url: string }) {
  const [, scheme = '', rest = url] = /^([a-z][a-z0-9+.-]*:\/\/)?(.*)$/i.exec(url) ?? [];
  const [host, ...path] = rest.split('/');
  return (
    <>
      {scheme}
      {scheme && <wbr />}
      {host}
      {path.map((seg, i) => (
        <Fragment key={i}>
          <wbr />/{seg}
        </Fragment>
      ))}
    </>
  );
}

/** A provider's recent requests and failures, and its last failure with its time. */
function Health({ h }: { h: ProviderRow['health'] }) {
  const tone = h.requests === 0 ? 'idle' : h.errors === 0 ? 'good' : h.errorRate >= 0.5 ? 'bad' : 'warn';
  return (
    <>
      <span className={`health health-${tone}`}>{healthSummary(h)}</span>
      {h.lastError && (
        <div className="health-last">
          Last error <span className="mono">{h.lastError}</span>
          <br />
          <Time value={h.lastErrorAt} />
        </div>
      )}
    </>
  );
}

/** The paywall's providers by name (docs/reference.md §15), with their health; disconnect one. */
export function Providers({ p }: { p: Settings }) {
  const [state, disconnect] = useMutation(DISCONNECT_PROVIDER);
  const own = p.providers.filter((r) => !r.builtin);
  return (
    <Card
      title="Providers"
      actions={
        own.length ? (
          <Badge tone="good">{own.length} connected</Badge>
        ) : p.builtinProvider ? (
          <Badge tone="info">Built-in</Badge>
        ) : (
          <Badge tone="warn">Not connected</Badge>
        )
      }
    >
      <ErrorBanner message={errorMessage(state.error)} />
      <DataTable
        label="Providers"
        rows={p.providers}
        rowKey={(r) => r.name}
        empty="No provider connected: chat requests are refused until one is. Connect one below."
        columns={[
          {
            head: 'Name',
            cell: (r) => (
              <>
                <div className="mono">{r.name}</div>
                {r.builtin && <Badge tone="info">Built-in (platform)</Badge>}
              </>
            ),
          },
          {
            head: 'Kind',
            cell: (r) => (
              <>
                <div>{KIND_LABELS[r.kind]}</div>
                {r.kind === 'OPENAI' && (
                  <div className="muted cell-note" title="Cap field when the client sends none">
                    cap <span className="mono">{capFieldName(r.capParameter)}</span>
                  </div>
                )}
              </>
            ),
          },
          { head: 'Base URL', className: 'mono', cell: (r) => <BreakableUrl url={r.baseUrl} /> },
          {
            head: 'Key',
            title: (r) => (r.builtin ? "The platform's key" : 'The last four characters of the key'),
            cell: (r) =>
              r.builtin ? (
                '—'
              ) : (
                <>
                  <div className="mono key">…{r.apiKeyLastFour}</div>
                  <div className="cell-note">
                    since <Time value={r.connectedAt} dateOnly />
                  </div>
                </>
              ),
          },
          { head: 'Health', cell: (r) => <Health h={r.health} /> },
          {
            className: 'actions',
            cell: (r) =>
              !r.builtin && (
                <Button
                  className="btn-sm"
                  variant="danger"
                  aria-label={`Disconnect ${r.name}`}
                  busy={state.fetching}
                  onClick={() =>
                    confirm(
                      `Disconnect the provider "${r.name}"? Models routed to it fail (or use their fallbacks) until a provider of that name is connected again.`,
                    ) && disconnect({ input: { paywallId: p.id, name: r.name } })
                  }
                >
                  Disconnect
                </Button>
              ),
          },
        ]}
      >
        <p className="legend-note">
          Models route to a provider by its name (Models &amp; prices); a model without one uses{' '}
          <span className="mono">default</span>. Health: the requests this server forwarded to each provider
          in the last {p.providers[0]?.health.windowMinutes ?? 5} minutes, fallback attempts included; errors
          are failures to answer (unreachable, timeouts, 429, 5xx, 401, 403).
        </p>
      </DataTable>
    </Card>
  );
}

/** Connects a provider by name, or replaces the one of that name. */
export function ConnectProvider({ p }: { p: Settings }) {
  const { values, setValues, set } = useForm(BLANK_PROVIDER);
  const [done, setDone] = useState<string | null>(null);
  // The notice of the last connect goes once the form is about another provider.
  useEffect(() => setDone(null), [values.name, values.kind, values.baseUrl]);
  const [state, connect] = useMutation(CONNECT_PROVIDER);
  const name = values.name.trim() || 'default';
  const replacing = p.providers.some((r) => !r.builtin && r.name === name);
  const kind = values.kind as ProviderKind;
  const setKind = (next: string) => {
    // The other kind's usual URL (or an empty field) becomes this kind's; a URL of one's own stays.
    setValues((v) => ({
      ...v,
      kind: next,
      baseUrl:
        v.baseUrl.trim() === '' || Object.values(KIND_BASE_URLS).includes(v.baseUrl.trim())
          ? KIND_BASE_URLS[next as ProviderKind]
          : v.baseUrl,
    }));
  };
  return (
    <Card title="Connect a provider">
      <ErrorBanner message={errorMessage(state.error)} />
      {done && <Notice tone="success">{done}</Notice>}
      <form
        className="stack"
        onSubmit={async (e) => {
          e.preventDefault();
          setDone(null);
          const r = await connect({
            input: {
              paywallId: p.id,
              name,
              kind,
              baseUrl: values.baseUrl.trim(),
              apiKey: values.apiKey.trim(),
              // Only chat requests to an OpenAI-compatible API carry it (an Anthropic one: max_tokens).
              ...(kind === 'OPENAI' ? { capParameter: values.capParameter as CapParameter } : {}),
            },
          });
          if (!r.error) {
            setValues((v) => ({ ...v, apiKey: '' }));
            setDone(`${replacing ? 'Replaced' : 'Connected'} ${name}.`);
          }
        }}
      >
        <FormFields
          values={values}
          set={(field) => (field === 'kind' ? setKind : set(field))}
          layout={[
            [
              {
                name: 'name',
                label: 'Provider name',
                placeholder: 'default',
                hint: (
                  <>
                    Models route to it by name; <span className="mono">default</span> serves models without
                    one.
                  </>
                ),
              },
              { name: 'kind', label: 'Provider kind', options: KINDS },
            ],
            {
              name: 'baseUrl',
              label: 'Provider base URL',
              required: true,
              placeholder: KIND_BASE_URLS[kind],
              hint:
                kind === 'ANTHROPIC'
                  ? "Anthropic's Messages API, ending in /v1 (the service appends /messages)."
                  : 'Any OpenAI-compatible API, ending in /v1 (the service appends /chat/completions).',
            },
            {
              name: 'apiKey',
              label: 'Provider API key',
              type: 'password',
              required: true,
              hint: 'Stored encrypted; never shown again.',
            },
            kind === 'OPENAI' && {
              name: 'capParameter',
              label: 'Cap field when the client sends none',
              options: CAP_FIELDS,
            },
          ]}
        />
        <div className="row">
          <Button type="submit" variant="primary" busy={state.fetching}>
            {replacing ? 'Replace provider' : 'Connect provider'}
          </Button>
          {(values.name !== BLANK_PROVIDER.name || values.kind !== BLANK_PROVIDER.kind) && (
            <Button variant="ghost" onClick={() => setValues(BLANK_PROVIDER)}>
              Clear
            </Button>
          )}
        </div>
      </form>
    </Card>
  );
}
