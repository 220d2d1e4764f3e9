import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import type { PaywallSummary } from '../session';
import {
  Badge,
  Button,
  Card,
  Empty,
  ErrorBanner,
  Field,
  Json,
  Loading,
  PageHeader,
  SecretOnce,
  Select,
  Time,
} from '../ui';

interface Sub {
  id: string;
  url: string;
  events: string[];
  isActive: boolean;
  description: string | null;
  secretSuffix: string;
  consecutiveFailures: number;
  lastDeliveredAt: string | null;
  createdAt: string;
}
interface Delivery {
  id: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  status: string;
  attempts: number;
  nextAttemptAt: string | null;
  responseStatus: number | null;
  responseLatencyMs: number | null;
  responseBody: string | null;
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
  event: Record<string, unknown>;
}
const SUB_FIELDS =
  'id url events isActive description secretSuffix consecutiveFailures lastDeliveredAt createdAt';
const SUBS = `query Subs($id: ID) { webhookSubscriptions(paywallId: $id) { ${SUB_FIELDS} } }`;
const DELIVERY_FIELDS =
  'id subscriptionId eventId eventType status attempts nextAttemptAt responseStatus responseLatencyMs responseBody lastError createdAt updatedAt event';
const DELIVERIES = `query Deliveries($id: ID, $status: String, $eventType: String, $subscriptionId: ID, $after: String) {
  webhookDeliveries(paywallId: $id, status: $status, eventType: $eventType, subscriptionId: $subscriptionId, first: 20, after: $after) {
    nodes { ${DELIVERY_FIELDS} } pageInfo { hasNextPage endCursor }
  }
}`;
const CREATE = `mutation CreateSub($input: CreateWebhookSubscriptionInput!) { createWebhookSubscription(input: $input) { ${SUB_FIELDS} secret } }`;
const DEACTIVATE = `mutation Deactivate($id: ID!) { deactivateWebhookSubscription(id: $id) { id isActive } }`;
const REACTIVATE = `mutation Reactivate($id: ID!) { reactivateWebhookSubscription(id: $id) { id isActive consecutiveFailures } }`;
const REDELIVER = `mutation Redeliver($eventId: ID!, $subscriptionId: ID) {
  redeliverWebhookEvent(eventId: $eventId, subscriptionId: $subscriptionId) { ${DELIVERY_FIELDS} }
}`;

const statusTone = (s: string) => (s === 'success' ? 'good' : s === 'error' ? 'bad' : 'warn');

export function WebhooksPage({ paywall }: { paywall: PaywallSummary }) {
  const [subs, refetchSubs] = useQuery<{ webhookSubscriptions: Sub[] }>({
    query: SUBS,
    variables: { id: paywall.id },
  });
  const [status, setStatus] = useState('');
  const [eventType, setEventType] = useState('');
  const [subscriptionId, setSubscriptionId] = useState('');
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const [selected, setSelected] = useState<string | null>(null);
  const [deliveries, refetchDeliveries] = useQuery<{
    webhookDeliveries: { nodes: Delivery[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } };
  }>({
    query: DELIVERIES,
    variables: {
      id: paywall.id,
      status: status || null,
      eventType: eventType.trim() || null,
      subscriptionId: subscriptionId || null,
      after: cursors[cursors.length - 1],
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
  const resetPages = () => setCursors([null]);
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
        {!subs.data && subs.fetching ? (
          <Loading />
        ) : !subs.data?.webhookSubscriptions.length ? (
          <Empty>No subscriptions yet.</Empty>
        ) : (
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th>URL</th>
                  <th>Events</th>
                  <th>Status</th>
                  <th className="num">Failures in a row</th>
                  <th>Last delivered</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {subs.data.webhookSubscriptions.map((s) => (
                  <tr key={s.id}>
                    <td className="mono" style={{ wordBreak: 'break-all' }}>
                      {s.url}
                      {s.description && <div className="muted">{s.description}</div>}
                    </td>
                    <td className="mono">{s.events.join(', ')}</td>
                    <td>{s.isActive ? <Badge tone="good">Active</Badge> : <Badge>Inactive</Badge>}</td>
                    <td className="num">{s.consecutiveFailures}</td>
                    <td>
                      <Time value={s.lastDeliveredAt} />
                    </td>
                    <td className="actions">
                      <Button
                        className="btn-sm"
                        onClick={async () => {
                          const r = await (s.isActive ? deactivate({ id: s.id }) : reactivate({ id: s.id }));
                          setActionError(errorMessage(r.error));
                        }}
                      >
                        {s.isActive ? 'Deactivate' : 'Reactivate'}
                      </Button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
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
          <Select
            label="Status"
            value={status}
            onChange={(v) => (setStatus(v), resetPages())}
            options={[
              { value: '', label: 'Any status' },
              { value: 'pending', label: 'Pending' },
              { value: 'success', label: 'Success' },
              { value: 'error', label: 'Error' },
            ]}
          />
          <Field
            label="Event type"
            value={eventType}
            onChange={(v) => (setEventType(v), resetPages())}
            placeholder="paywall.balance.deposit.created"
          />
          <Select
            label="Subscription"
            value={subscriptionId}
            onChange={(v) => (setSubscriptionId(v), resetPages())}
            options={[
              { value: '', label: 'All subscriptions' },
              ...(subs.data?.webhookSubscriptions ?? []).map((s) => ({ value: s.id, label: s.url })),
            ]}
          />
        </div>
        <ErrorBanner message={errorMessage(deliveries.error)} />
        {note && (
          <div className="banner banner-success" role="status">
            {note}
          </div>
        )}
        {!deliveries.data && deliveries.fetching ? (
          <Loading />
        ) : list.length === 0 ? (
          <Empty>No deliveries match.</Empty>
        ) : (
          <div className="table-wrap">
            <table aria-label="Deliveries">
              <thead>
                <tr>
                  <th>Created</th>
                  <th>Event</th>
                  <th>Status</th>
                  <th className="num">Attempts</th>
                  <th className="num">Response</th>
                  <th className="num">Latency</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {list.map((d) => (
                  <tr
                    key={d.id}
                    className={`clickable ${selected === d.id ? 'selected' : ''}`}
                    onClick={() => setSelected(d.id)}
                  >
                    <td>
                      <Time value={d.createdAt} />
                    </td>
                    <td className="mono">{d.eventType}</td>
                    <td>
                      <Badge tone={statusTone(d.status)}>{d.status}</Badge>
                    </td>
                    <td className="num">{d.attempts}</td>
                    <td className="num">{d.responseStatus ?? '—'}</td>
                    <td className="num">{d.responseLatencyMs != null ? `${d.responseLatencyMs} ms` : '—'}</td>
                    <td className="actions">
                      <Button
                        className="btn-sm"
                        variant="ghost"
                        aria-expanded={selected === d.id}
                        onClick={() => setSelected(selected === d.id ? null : d.id)}
                      >
                        {selected === d.id ? 'Close' : 'Open'}
                      </Button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {(cursors.length > 1 || deliveries.data?.webhookDeliveries.pageInfo.hasNextPage) && (
          <div className="row" style={{ marginTop: 10 }}>
            <Button
              className="btn-sm"
              disabled={cursors.length <= 1}
              onClick={() => setCursors(cursors.slice(0, -1))}
            >
              Newer
            </Button>
            <Button
              className="btn-sm"
              disabled={!deliveries.data?.webhookDeliveries.pageInfo.hasNextPage}
              onClick={() => setCursors([...cursors, deliveries.data!.webhookDeliveries.pageInfo.endCursor])}
            >
              Older
            </Button>
          </div>
        )}
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
            <dl className="kv">
              <dt>Status</dt>
              <dd>
                <Badge tone={statusTone(current.status)}>{current.status}</Badge>
              </dd>
              <dt>Attempts</dt>
              <dd className="num" style={{ textAlign: 'left' }}>
                {current.attempts}
              </dd>
              <dt>Next attempt</dt>
              <dd>
                <Time value={current.nextAttemptAt} />
              </dd>
              <dt>Response status</dt>
              <dd>{current.responseStatus ?? '—'}</dd>
              <dt>Last error</dt>
              <dd>{current.lastError ?? '—'}</dd>
              <dt>Updated</dt>
              <dd>
                <Time value={current.updatedAt} />
              </dd>
            </dl>
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
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState('*');
  const [description, setDescription] = useState('');
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
      setUrl('');
      setDescription('');
      props.onCreated();
    }
  };
  return (
    <Card title="New subscription">
      {secret && <SecretOnce title="Signing secret" secret={secret} onDone={() => setSecret(null)} />}
      <ErrorBanner message={errorMessage(state.error)} />
      <form onSubmit={submit} className="stack">
        <div className="row">
          <Field
            label="Endpoint URL"
            value={url}
            onChange={setUrl}
            placeholder="https://example.com/webhooks"
            required
          />
          <Field
            label="Events"
            value={events}
            onChange={setEvents}
            hint="Comma-separated names, prefix.* families, or * alone."
          />
        </div>
        <Field label="Description (optional)" value={description} onChange={setDescription} />
        <div>
          <Button type="submit" variant="primary" busy={state.fetching}>
            Subscribe
          </Button>
        </div>
      </form>
    </Card>
  );
}
