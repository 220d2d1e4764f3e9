import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { PaywallSettingsFragment } from '../gql/graphql';
import type { PaywallSummary } from '../session';
import { ConnectProvider, Providers } from './SettingsProviders';
import {
  Badge,
  Button,
  Card,
  ErrorBanner,
  FormFields,
  KeyValues,
  Loading,
  Notice,
  PageHeader,
  useForm,
} from '../ui';

type Settings = PaywallSettingsFragment;
graphql(`
  fragment PaywallSettings on Paywall {
    id
    name
    description
    mode
    markup
    topupUrl
    trialCredits
    dailyRequestLimit
    dailySpendLimit
    lowBalanceThreshold
    connectMessageTemplate
    topupMessageTemplate
    builtinProvider
    providers {
      ...ProviderRow
    }
    stripe {
      connected
      webhookId
      topupAmounts
    }
  }
`);
const SETTINGS = graphql(`
  query Settings($id: ID) {
    paywall(id: $id) {
      ...PaywallSettings
    }
  }
`);
const UPDATE = graphql(`
  mutation Update($input: UpdatePaywallInput!) {
    updatePaywall(input: $input) {
      ...PaywallSettings
    }
  }
`);
const CONNECT_STRIPE = graphql(`
  mutation ConnectStripe($input: ConnectStripeInput!) {
    connectStripe(input: $input) {
      ...PaywallSettings
    }
  }
`);
const ROTATE_STRIPE = graphql(`
  mutation RotateStripe($id: ID) {
    rotateStripeWebhook(paywallId: $id) {
      ...PaywallSettings
    }
  }
`);
const DISCONNECT_STRIPE = graphql(`
  mutation DisconnectStripe($id: ID) {
    disconnectStripe(paywallId: $id) {
      ...PaywallSettings
    }
  }
`);

export function SettingsPage({ paywall }: { paywall: PaywallSummary }) {
  const [{ data, fetching, error }] = useQuery({
    query: SETTINGS,
    variables: { id: paywall.id },
  });
  if (!data) return fetching ? <Loading /> : <ErrorBanner message={errorMessage(error)} />;
  return (
    <div className="stack">
      <PageHeader title="Settings" subtitle={`${data.paywall.name} · ${data.paywall.mode} mode`} />
      <General p={data.paywall} />
      <Providers p={data.paywall} />
      <div className="grid-2" style={{ alignItems: 'start' }}>
        <ConnectProvider p={data.paywall} />
        {data.paywall.mode === 'DEFAULT' && <Stripe p={data.paywall} />}
      </div>
    </div>
  );
}

const orNull = (s: string) => (s.trim() === '' ? null : s.trim());
/** "1.500000" → "1.5" for editing. */
const plain = (money: string) => money.replace(/\.?0+$/, '') || '0';

function General({ p }: { p: Settings }) {
  const [saved, setSaved] = useState(false);
  const { values: f, set } = useForm(
    () => ({
      name: p.name,
      description: p.description ?? '',
      markup: p.markup,
      trialCredits: plain(p.trialCredits),
      dailyRequestLimit: p.dailyRequestLimit?.toString() ?? '',
      dailySpendLimit: p.dailySpendLimit ? plain(p.dailySpendLimit) : '',
      lowBalanceThreshold: p.lowBalanceThreshold ? plain(p.lowBalanceThreshold) : '',
      topupUrl: p.topupUrl ?? '',
      connectMessageTemplate: p.connectMessageTemplate ?? '',
      topupMessageTemplate: p.topupMessageTemplate ?? '',
    }),
    () => setSaved(false),
  );
  const [state, update] = useMutation(UPDATE);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    // Only what changed: the paywall.updated event then names exactly those fields.
    const next: Record<string, unknown> = {
      name: f.name.trim(),
      description: f.description.trim(),
      markup: f.markup.trim(),
      dailyRequestLimit: f.dailyRequestLimit.trim() === '' ? null : Number(f.dailyRequestLimit),
      dailySpendLimit: orNull(f.dailySpendLimit),
      lowBalanceThreshold: orNull(f.lowBalanceThreshold),
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
      lowBalanceThreshold: p.lowBalanceThreshold ? plain(p.lowBalanceThreshold) : null,
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
        <FormFields
          values={f}
          set={set}
          layout={[
            [
              { name: 'name', label: 'Name', required: true },
              {
                name: 'markup',
                label: 'Markup',
                inputMode: 'decimal',
                hint: 'Token cost × markup = end-user price (e.g. 1.5).',
              },
            ],
            {
              name: 'description',
              label: 'Description',
              // DEFAULT mode has no consent page: its end users never see the description.
              hint:
                p.mode === 'SHARED'
                  ? 'Shown to wallet users on the consent page.'
                  : 'For your own reference: DEFAULT mode has no consent page, end users do not see it.',
            },
            [
              p.mode === 'DEFAULT' && {
                name: 'trialCredits',
                label: 'Trial credits (USDC)',
                inputMode: 'decimal',
                hint: 'Granted to each new user; 0 = off.',
              },
              {
                name: 'dailyRequestLimit',
                label: 'Daily requests per user',
                inputMode: 'numeric',
                hint: 'Empty = no limit.',
              },
              {
                name: 'dailySpendLimit',
                label: 'Daily spend per user (USDC)',
                inputMode: 'decimal',
                hint: 'Empty = no limit.',
              },
            ],
            {
              name: 'lowBalanceThreshold',
              label: 'Low-balance alert (USDC)',
              inputMode: 'decimal',
              hint: 'paywall.balance.low when a charge takes a user’s free balance below this (once per crossing). Empty = off.',
            },
            p.mode === 'DEFAULT' && {
              name: 'topupUrl',
              label: 'Top-up URL',
              placeholder: 'https://your-app.example/billing',
              hint: 'Where users without balance are sent (unless Stripe is connected).',
            },
            [
              {
                name: 'connectMessageTemplate',
                label: 'Connect message',
                hint: 'Blocked-reply text for unconnected users; must contain {url}.',
              },
              {
                name: 'topupMessageTemplate',
                label: 'Top-up message',
                hint: 'Blocked-reply text for short balances; must contain {url}.',
              },
            ],
          ]}
        />
        <div>
          <Button type="submit" variant="primary" busy={state.fetching}>
            Save settings
          </Button>
        </div>
      </form>
    </Card>
  );
}

function Stripe({ p }: { p: Settings }) {
  const { values, setValues, set } = useForm({
    secretKey: '',
    amounts: p.stripe.topupAmounts.length ? p.stripe.topupAmounts.join(', ') : '5, 10, 20',
  });
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
        <KeyValues
          style={{ marginBottom: 12 }}
          items={[
            ['Webhook endpoint', p.stripe.webhookId, { className: 'mono' }],
            ['Amounts', p.stripe.topupAmounts.map((a) => `${a} USD`).join(' · ')],
          ]}
        />
      )}
      <form
        className="stack"
        onSubmit={async (e) => {
          e.preventDefault();
          const r = await connect({
            input: {
              paywallId: p.id,
              secretKey: values.secretKey.trim(),
              topupAmounts: values.amounts
                .split(',')
                .map((s) => s.trim())
                .filter(Boolean),
            },
          });
          if (!r.error) setValues((v) => ({ ...v, secretKey: '' }));
        }}
      >
        <FormFields
          values={values}
          set={set}
          layout={[
            {
              name: 'secretKey',
              label: 'Stripe secret key',
              type: 'password',
              required: true,
              placeholder: 'sk_live_… or rk_live_…',
              hint: 'Stored encrypted; never shown again.',
            },
            {
              name: 'amounts',
              label: 'Top-up amounts (USD)',
              hint: 'Comma-separated, offered as buttons on the hosted top-up page.',
            },
          ]}
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
