import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { WebhookDeliveryRowFragment, WebhookSubscriptionRowFragment } from '../gql/graphql';
import type { PaywallSummary } from '../session';
import {
  Badge,
  Button,
  Card,
  DataTable,
  Empty,
  ErrorBanner,
  FormFields,
  Json,
  KeyValues,
  Notice,
  PageHeader,
  Pager,
  SecretOnce,
  Time,
  timeColumn,
  ToggleButton,
  useForm,
  usePages,
} from '../ui';

type Sub = WebhookSubscriptionRowFragment;
type Delivery = WebhookDeliveryRowFragment;
graphql(`
  fragment WebhookSubscriptionRow on WebhookSubscription {
    id
    url
    events
    isActive
    description
    secretSuffix
    consecutiveFailures
    lastDeliveredAt
    createdAt
  }
`);
graphql(`
  fragment WebhookDeliveryRow on WebhookDelivery {
    id
    subscriptionId
    eventId
    eventType
    status
    attempts
    nextAttemptAt
    responseStatus
    responseLatencyMs
    responseBody
    lastError
    createdAt
    updatedAt
    event
  }
`);
const SUBS = graphql(`
  query Subs($id: ID) {
    webhookSubscriptions(paywallId: $id) {
      ...WebhookSubscriptionRow
    }
  }
`);
const DELIVERIES = graphql(`
  query Deliveries($id: ID, $status: String, $eventType: String, $subscriptionId: ID, $after: String) {
    webhookDeliveries(
      paywallId: $id
      status: $status
      eventType: $eventType
      subscriptionId: $subscriptionId
      first: 20
      after: $after
    ) {
      nodes {
        ...WebhookDeliveryRow
      }
      pageInfo {
        hasNextPage
        endCursor
      }
    }
  }
`);
const CREATE = graphql(`
  mutation CreateSub($input: CreateWebhookSubscriptionInput!) {
    createWebhookSubscription(input: $input) {
      ...WebhookSubscriptionRow
      secret
    }
  }
`);
const DEACTIVATE = graphql(`
  mutation Deactivate($id: ID!) {
    deactivateWebhookSubscription(id: $id) {
      id
      isActive
    }
  }
`);
const REACTIVATE = graphql(`
  mutation Reactivate($id: ID!) {
    reactivateWebhookSubscription(id: $id) {
      id
      isActive
      consecutiveFailures
    }
  }
`);
const REDELIVER = graphql(`
  mutation Redeliver($eventId: ID!, $subscriptionId: ID) {
    redeliverWebhookEvent(eventId: $eventId, subscriptionId: $subscriptionId) {
      ...WebhookDeliveryRow
    }
  }
`);

const statusTone = (s: string) => (s === 'success' ? 'good' : s === 'error' ? 'bad' : 'warn');

export function WebhooksPage({ paywall }: { paywall: PaywallSummary }) {
  const [subs, refetchSubs] = useQuery({
    query: SUBS,
    variables: { id: paywall.id },
  });
  const pages = usePages();
  const filters = useForm({ status: '', eventType: '', subscriptionId: '' }, pages.reset);
  const { status, eventType, subscriptionId } = filters.values;
  const [selected, setSelected] = useState<string | null>(null);
  const [deliveries, refetchDeliveries] = useQuery({
    query: DELIVERIES,
    variables: {
      id: paywall.id,
      status: status || null,
      eventType: eventType.trim() || null,
      subscriptionId: subscriptionId || null,
      after: pages.after,
    },
    requestPolicy: 'cache-and-network',
  });
  const [, deactivate] = useMutation(DEACTIVATE);
  const [, reactivate] = useMutation(REACTIVATE);
  const [redeliverState, redeliver] = useMutation(REDELIVER);
  const [actionError, setActionError] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const list = deliveries.data?.webhookDeliveries.nodes ?? [];
  const current = list.find((d) => d.id === selected) ?? null;
  const refresh = () => refetchDeliveries({ requestPolicy: 'network-only' });
  return (
    <div className="stack">
      <PageHeader
        title="Webhooks"
        subtitle="Signed event notifications: subscriptions and their delivery logs."
      />
      <ErrorBanner message={actionError} />
      <NewSubscription paywall={paywall} onCreated={() => refetchSubs({ requestPolicy: 'network-only' })} />
      <Card title="Subscriptions">
        <ErrorBanner message={errorMessage(subs.error)} />
        <DataTable
          rows={subs.data?.webhookSubscriptions ?? []}
          rowKey={(s) => s.id}
          loading={!subs.data && subs.fetching}
          empty="No subscriptions yet."
          columns={[
            {
              head: 'URL',
              className: 'mono',
              style: { wordBreak: 'break-all' },
              cell: (s) => (
                <>
                  {s.url}
                  {s.description && <div className="muted">{s.description}</div>}
                </>
              ),
            },
            { head: 'Events', className: 'mono', cell: (s) => s.events.join(', ') },
            {
              head: 'Status',
              cell: (s) => (s.isActive ? <Badge tone="good">Active</Badge> : <Badge>Inactive</Badge>),
            },
            { head: 'Failures in a row', num: true, cell: (s) => s.consecutiveFailures },
            timeColumn('Last delivered', (s: Sub) => s.lastDeliveredAt),
            {
              className: 'actions',
              cell: (s) => (
                <Button
                  className="btn-sm"
                  onClick={async () => {
                    const r = await (s.isActive ? deactivate({ id: s.id }) : reactivate({ id: s.id }));
                    setActionError(errorMessage(r.error));
                  }}
                >
                  {s.isActive ? 'Deactivate' : 'Reactivate'}
                </Button>
              ),
            },
          ]}
        />
      </Card>
      <Card
        title="Delivery log"
        actions={
          <Button className="btn-sm" onClick={refresh}>
            Refresh
          </Button>
        }
      >
        <div className="row" style={{ marginBottom: 12 }}>
          <FormFields
            values={filters.values}
            set={filters.set}
            layout={[
              {
                name: 'status',
                label: 'Status',
                options: [
                  { value: '', label: 'Any status' },
                  { value: 'pending', label: 'Pending' },
                  { value: 'success', label: 'Success' },
                  { value: 'error', label: 'Error' },
                ],
              },
              { name: 'eventType', label: 'Event type', placeholder: 'paywall.balance.deposit.created' },
              {
                name: 'subscriptionId',
                label: 'Subscription',
                options: [
                  { value: '', label: 'All subscriptions' },
                  ...(subs.data?.webhookSubscriptions ?? []).map((s) => ({ value: s.id, label: s.url })),
                ],
              },
            ]}
          />
        </div>
        <ErrorBanner message={errorMessage(deliveries.error)} />
        {note && <Notice tone="success">{note}</Notice>}
        <DataTable
          label="Deliveries"
          rows={list}
          rowKey={(d) => d.id}
          loading={!deliveries.data && deliveries.fetching}
          empty="No deliveries match."
          onRowClick={(d) => setSelected(d.id)}
          selected={(d) => selected === d.id}
          columns={[
            timeColumn('Created', (d: Delivery) => d.createdAt),
            { head: 'Event', className: 'mono', cell: (d) => d.eventType },
            { head: 'Status', cell: (d) => <Badge tone={statusTone(d.status)}>{d.status}</Badge> },
            { head: 'Attempts', num: true, cell: (d) => d.attempts },
            { head: 'Response', num: true, cell: (d) => d.responseStatus ?? '—' },
            {
              head: 'Latency',
              num: true,
              cell: (d) => (d.responseLatencyMs != null ? `${d.responseLatencyMs} ms` : '—'),
            },
            {
              className: 'actions',
              cell: (d) => (
                <ToggleButton
                  open={selected === d.id}
                  onToggle={() => setSelected(selected === d.id ? null : d.id)}
                  labels={['Open', 'Close']}
                />
              ),
            },
          ]}
        />
        <Pager pages={pages} pageInfo={deliveries.data?.webhookDeliveries.pageInfo} />
      </Card>
      {current && (
        <Card
          title={<>Delivery of {current.eventType}</>}
          actions={
            <Button
              variant="primary"
              busy={redeliverState.fetching}
              onClick={async () => {
                setNote(null);
                const r = await redeliver({
                  eventId: current.eventId,
                  subscriptionId: current.subscriptionId,
                });
                setActionError(errorMessage(r.error));
                if (r.data) {
                  setNote(
                    `Redelivery queued: the delivery is pending again and due now (attempts keep counting).`,
                  );
                  refresh();
                }
              }}
            >
              Redeliver
            </Button>
          }
        >
          <div className="grid-2">
            <KeyValues
              items={[
                ['Status', <Badge tone={statusTone(current.status)}>{current.status}</Badge>],
                ['Attempts', current.attempts, { className: 'num', style: { textAlign: 'left' } }],
                ['Next attempt', <Time value={current.nextAttemptAt} />],
                ['Response status', current.responseStatus ?? '—'],
                ['Last error', current.lastError ?? '—'],
                ['Updated', <Time value={current.updatedAt} />],
              ]}
            />
            <div>
              <h3>Response body</h3>
              {current.responseBody ? (
                <pre className="json">{current.responseBody}</pre>
              ) : (
                <Empty>No response body.</Empty>
              )}
            </div>
          </div>
          <h3 style={{ marginTop: 14 }}>Payload (event)</h3>
          <Json value={current.event} />
        </Card>
      )}
    </div>
  );
}

function NewSubscription(props: { paywall: PaywallSummary; onCreated: () => void }) {
  const { values, setValues, set } = useForm({ url: '', events: '*', description: '' });
  const { url, events, description } = values;
  const [secret, setSecret] = useState<string | null>(null);
  const [state, create] = useMutation(CREATE);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await create({
      input: {
        paywallId: props.paywall.id,
        url: url.trim(),
        events: events
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
        description: description.trim() || undefined,
      },
    });
    if (r.data) {
      setSecret(r.data.createWebhookSubscription.secret);
      setValues((v) => ({ ...v, url: '', description: '' }));
      props.onCreated();
    }
  };
  return (
    <Card title="New subscription">
      {secret && <SecretOnce title="Signing secret" secret={secret} onDone={() => setSecret(null)} />}
      <ErrorBanner message={errorMessage(state.error)} />
      <form onSubmit={submit} className="stack">
        <FormFields
          values={values}
          set={set}
          layout={[
            [
              {
                name: 'url',
                label: 'Endpoint URL',
                placeholder: 'https://example.com/webhooks',
                required: true,
              },
              {
                name: 'events',
                label: 'Events',
                hint: 'Comma-separated names, prefix.* families, or * alone.',
              },
            ],
            { name: 'description', label: 'Description (optional)' },
          ]}
        />
        <div>
          <Button type="submit" variant="primary" busy={state.fetching}>
            Subscribe
          </Button>
        </div>
      </form>
    </Card>
  );
}
