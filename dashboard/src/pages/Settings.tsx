import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import type { PaywallSummary } from '../session';
import { Badge, Button, Card, ErrorBanner, Field, Loading, Notice, PageHeader, Time } from '../ui';

interface Settings {
  id: string;
  name: string;
  description: string | null;
  mode: string;
  markup: string;
  topupUrl: string | null;
  trialCredits: string;
  dailyRequestLimit: number | null;
  dailySpendLimit: string | null;
  connectMessageTemplate: string | null;
  topupMessageTemplate: string | null;
  builtinProvider: boolean;
  provider: { baseUrl: string; apiKeyLastFour: string; connectedAt: string } | null;
  stripe: { connected: boolean; webhookId: string | null; topupAmounts: string[] };
}
const FIELDS = `id name description mode markup topupUrl trialCredits dailyRequestLimit dailySpendLimit connectMessageTemplate
  topupMessageTemplate builtinProvider provider { baseUrl apiKeyLastFour connectedAt } stripe { connected webhookId topupAmounts }`;
const SETTINGS = `query Settings($id: ID) { paywall(id: $id) { ${FIELDS} } }`;
const UPDATE = `mutation Update($input: UpdatePaywallInput!) { updatePaywall(input: $input) { ${FIELDS} } }`;
const CONNECT_PROVIDER = `mutation ConnectProvider($input: ConnectProviderInput!) { connectProvider(input: $input) { ${FIELDS} } }`;
const DISCONNECT_PROVIDER = `mutation DisconnectProvider($id: ID) { disconnectProvider(paywallId: $id) { ${FIELDS} } }`;
const CONNECT_STRIPE = `mutation ConnectStripe($input: ConnectStripeInput!) { connectStripe(input: $input) { ${FIELDS} } }`;
const ROTATE_STRIPE = `mutation RotateStripe($id: ID) { rotateStripeWebhook(paywallId: $id) { ${FIELDS} } }`;
const DISCONNECT_STRIPE = `mutation DisconnectStripe($id: ID) { disconnectStripe(paywallId: $id) { ${FIELDS} } }`;

export function SettingsPage({ paywall }: { paywall: PaywallSummary }) {
  const [{ data, fetching, error }] = useQuery<{ paywall: Settings }>({
    query: SETTINGS,
    variables: { id: paywall.id },
  });
  if (!data) return fetching ? <Loading /> : <ErrorBanner message={errorMessage(error)} />;
  return (
    <div className="stack">
      <PageHeader title="Settings" subtitle={`${data.paywall.name} · ${data.paywall.mode} mode`} />
      <General p={data.paywall} />
      <div className="grid-2" style={{ alignItems: 'start' }}>
        <Provider p={data.paywall} />
        {data.paywall.mode === 'DEFAULT' && <Stripe p={data.paywall} />}
      </div>
    </div>
  );
}

const orNull = (s: string) => (s.trim() === '' ? null : s.trim());
/** "1.500000" → "1.5" for editing. */
const plain = (money: string) => money.replace(/\.?0+$/, '') || '0';

function General({ p }: { p: Settings }) {
  const [f, setF] = useState({
    name: p.name,
    description: p.description ?? '',
    markup: p.markup,
    trialCredits: plain(p.trialCredits),
    dailyRequestLimit: p.dailyRequestLimit?.toString() ?? '',
    dailySpendLimit: p.dailySpendLimit ? plain(p.dailySpendLimit) : '',
    topupUrl: p.topupUrl ?? '',
    connectMessageTemplate: p.connectMessageTemplate ?? '',
    topupMessageTemplate: p.topupMessageTemplate ?? '',
  });
  const [saved, setSaved] = useState(false);
  const [state, update] = useMutation(UPDATE);
  const set = (k: keyof typeof f) => (v: string) => (setF({ ...f, [k]: v }), setSaved(false));
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    // Only what changed: the paywall.updated event then names exactly those fields.
    const next: Record<string, unknown> = {
      name: f.name.trim(),
      description: f.description.trim(),
      markup: f.markup.trim(),
      dailyRequestLimit: f.dailyRequestLimit.trim() === '' ? null : Number(f.dailyRequestLimit),
      dailySpendLimit: orNull(f.dailySpendLimit),
      connectMessageTemplate: orNull(f.connectMessageTemplate),
      topupMessageTemplate: orNull(f.topupMessageTemplate),
      ...(p.mode === 'DEFAULT'
        ? { trialCredits: f.trialCredits.trim() || '0', topupUrl: orNull(f.topupUrl) }
        : {}),
    };
    const before: Record<string, unknown> = {
      name: p.name,
      description: p.description ?? '',
      markup: p.markup,
      dailyRequestLimit: p.dailyRequestLimit,
      dailySpendLimit: p.dailySpendLimit ? plain(p.dailySpendLimit) : null,
      connectMessageTemplate: p.connectMessageTemplate,
      topupMessageTemplate: p.topupMessageTemplate,
      trialCredits: plain(p.trialCredits),
      topupUrl: p.topupUrl,
    };
    const input: Record<string, unknown> = { paywallId: p.id };
    for (const [k, v] of Object.entries(next)) if (v !== before[k]) input[k] = v;
    const r = await update({ input });
    setSaved(!r.error);
  };
  return (
    <Card title="General">
      <ErrorBanner message={errorMessage(state.error)} />
      {saved && <Notice tone="success">Saved.</Notice>}
      <form className="stack" onSubmit={submit}>
        <div className="row">
          <Field label="Name" value={f.name} onChange={set('name')} required />
          <Field
            label="Markup"
            value={f.markup}
            onChange={set('markup')}
            inputMode="decimal"
            hint="Token cost × markup = end-user price (e.g. 1.5)."
          />
        </div>
        <Field
          label="Description"
          value={f.description}
          onChange={set('description')}
          hint="Shown to wallet users on the consent page."
        />
        <div className="row">
          {p.mode === 'DEFAULT' && (
            <Field
              label="Trial credits (USDC)"
              value={f.trialCredits}
              onChange={set('trialCredits')}
              inputMode="decimal"
              hint="Granted to each new user; 0 = off."
            />
          )}
          <Field
            label="Daily requests per user"
            value={f.dailyRequestLimit}
            onChange={set('dailyRequestLimit')}
            inputMode="numeric"
            hint="Empty = no limit."
          />
          <Field
            label="Daily spend per user (USDC)"
            value={f.dailySpendLimit}
            onChange={set('dailySpendLimit')}
            inputMode="decimal"
            hint="Empty = no limit."
          />
        </div>
        {p.mode === 'DEFAULT' && (
          <Field
            label="Top-up URL"
            value={f.topupUrl}
            onChange={set('topupUrl')}
            placeholder="https://your-app.example/billing"
            hint="Where users without balance are sent (unless Stripe is connected)."
          />
        )}
        <div className="row">
          <Field
            label="Connect message"
            value={f.connectMessageTemplate}
            onChange={set('connectMessageTemplate')}
            hint="Blocked-reply text for unconnected users; must contain {url}."
          />
          <Field
            label="Top-up message"
            value={f.topupMessageTemplate}
            onChange={set('topupMessageTemplate')}
            hint="Blocked-reply text for short balances; must contain {url}."
          />
        </div>
        <div>
          <Button type="submit" variant="primary" busy={state.fetching}>
            Save settings
          </Button>
        </div>
      </form>
    </Card>
  );
}

function Provider({ p }: { p: Settings }) {
  const [baseUrl, setBaseUrl] = useState(p.provider?.baseUrl ?? 'https://api.openai.com/v1');
  const [apiKey, setApiKey] = useState('');
  const [cState, connect] = useMutation(CONNECT_PROVIDER);
  const [dState, disconnect] = useMutation(DISCONNECT_PROVIDER);
  return (
    <Card
      title="Model provider"
      actions={
        p.provider ? (
          <Badge tone="good">Connected</Badge>
        ) : p.builtinProvider ? (
          <Badge tone="info">Built-in</Badge>
        ) : (
          <Badge tone="warn">Not connected</Badge>
        )
      }
    >
      <ErrorBanner message={errorMessage(cState.error) ?? errorMessage(dState.error)} />
      {p.provider && (
        <dl className="kv" style={{ marginBottom: 12 }}>
          <dt>Base URL</dt>
          <dd className="mono">{p.provider.baseUrl}</dd>
          <dt>Key</dt>
          <dd className="mono">••••{p.provider.apiKeyLastFour}</dd>
          <dt>Connected</dt>
          <dd>
            <Time value={p.provider.connectedAt} />
          </dd>
        </dl>
      )}
      <form
        className="stack"
        onSubmit={async (e) => {
          e.preventDefault();
          const r = await connect({
            input: { paywallId: p.id, baseUrl: baseUrl.trim(), apiKey: apiKey.trim() },
          });
          if (!r.error) setApiKey('');
        }}
      >
        <Field label="Provider base URL" value={baseUrl} onChange={setBaseUrl} required />
        <Field
          label="Provider API key"
          type="password"
          value={apiKey}
          onChange={setApiKey}
          required
          hint="Stored encrypted; never shown again."
        />
        <div className="row">
          <Button type="submit" variant="primary" busy={cState.fetching}>
            {p.provider ? 'Replace provider' : 'Connect provider'}
          </Button>
          {p.provider && (
            <Button
              variant="danger"
              busy={dState.fetching}
              onClick={() =>
                confirm('Disconnect the provider? Chat requests stop until one is connected.') &&
                disconnect({ id: p.id })
              }
            >
              Disconnect
            </Button>
          )}
        </div>
      </form>
    </Card>
  );
}

function Stripe({ p }: { p: Settings }) {
  const [secretKey, setSecretKey] = useState('');
  const [amounts, setAmounts] = useState(
    p.stripe.topupAmounts.length ? p.stripe.topupAmounts.join(', ') : '5, 10, 20',
  );
  const [cState, connect] = useMutation(CONNECT_STRIPE);
  const [rState, rotate] = useMutation(ROTATE_STRIPE);
  const [dState, disconnect] = useMutation(DISCONNECT_STRIPE);
  return (
    <Card
      title="Stripe top-ups"
      actions={p.stripe.connected ? <Badge tone="good">Connected</Badge> : <Badge>Off</Badge>}
    >
      <ErrorBanner
        message={errorMessage(cState.error) ?? errorMessage(rState.error) ?? errorMessage(dState.error)}
      />
      {p.stripe.connected && (
        <dl className="kv" style={{ marginBottom: 12 }}>
          <dt>Webhook endpoint</dt>
          <dd className="mono">{p.stripe.webhookId}</dd>
          <dt>Amounts</dt>
          <dd>{p.stripe.topupAmounts.map((a) => `${a} USD`).join(' · ')}</dd>
        </dl>
      )}
      <form
        className="stack"
        onSubmit={async (e) => {
          e.preventDefault();
          const r = await connect({
            input: {
              paywallId: p.id,
              secretKey: secretKey.trim(),
              topupAmounts: amounts
                .split(',')
                .map((s) => s.trim())
                .filter(Boolean),
            },
          });
          if (!r.error) setSecretKey('');
        }}
      >
        <Field
          label="Stripe secret key"
          type="password"
          value={secretKey}
          onChange={setSecretKey}
          required
          placeholder="sk_live_… or rk_live_…"
          hint="Stored encrypted; never shown again."
        />
        <Field
          label="Top-up amounts (USD)"
          value={amounts}
          onChange={setAmounts}
          hint="Comma-separated, offered as buttons on the hosted top-up page."
        />
        <div className="row">
          <Button type="submit" variant="primary" busy={cState.fetching}>
            {p.stripe.connected ? 'Replace key' : 'Connect Stripe'}
          </Button>
          {p.stripe.connected && (
            <>
              <Button busy={rState.fetching} onClick={() => rotate({ id: p.id })}>
                Rotate webhook
              </Button>
              <Button
                variant="danger"
                busy={dState.fetching}
                onClick={() => confirm('Disconnect Stripe?') && disconnect({ id: p.id })}
              >
                Disconnect
              </Button>
            </>
          )}
        </div>
      </form>
    </Card>
  );
}
