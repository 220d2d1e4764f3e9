import { useState } from 'react';
import { useSubscription } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { LiveSubscription, LiveSubscriptionVariables } from '../gql/graphql';
import { time, usdc } from '../format';
import type { PaywallSummary } from '../session';
import { Badge, Button, Card, Empty, ErrorBanner, Json, PageHeader, Select, ToggleButton } from '../ui';

type LiveEvent = LiveSubscription['paywallEvents'];

const EVENTS = graphql(`
  subscription Live($id: ID, $types: [String!]) {
    paywallEvents(paywallId: $id, types: $types) {
      id
      type
      version
      createdAt
      data
      subject
    }
  }
`);

const FILTERS = [
  { value: '*', label: 'All events' },
  { value: 'paywall.balance.*', label: 'Balances (deposits, charges)' },
  { value: 'paywall.usage.*', label: 'Usage charges and limits' },
  { value: 'paywall.proxy.*', label: 'Proxy requests' },
  { value: 'paywall.authorization.*', label: 'User authorizations' },
  { value: 'paywall.request.blocked', label: 'Blocked requests' },
  { value: 'paywall.integration.*', label: 'Integrations' },
  { value: 'paywall.updated', label: 'Settings changes' },
];

const MAX = 200;

function summary(e: LiveEvent): string {
  // `data` and `subject` are JSON in the schema: their fields depend on the event type.
  const d = (e.data ?? {}) as Record<string, unknown>;
  const subject = e.subject as { externalId?: string } | null;
  const parts: string[] = [];
  const who = (d.externalUserId as string) ?? subject?.externalId;
  if (who) parts.push(`user ${who}`);
  for (const k of ['amount', 'cost', 'requestedAmount'] as const)
    if (typeof d[k] === 'string')
      parts.push(`${k === 'requestedAmount' ? 'requested' : k} ${usdc(String(d[k]))} USDC`);
  if (typeof d.model === 'string') parts.push(d.model);
  if (typeof d.reason === 'string') parts.push(`reason ${d.reason}`);
  if (typeof d.errorCode === 'string') parts.push(d.errorCode);
  return parts.join(' · ');
}

const tone = (type: string) =>
  type.includes('deposit') || type.endsWith('.completed')
    ? 'good'
    : type.includes('fail') || type.includes('blocked') || type.includes('depleted')
      ? 'bad'
      : 'neutral';

export function LivePage({ paywall }: { paywall: PaywallSummary }) {
  const [filter, setFilter] = useState('*');
  const [paused, setPaused] = useState(false);
  const [open, setOpen] = useState<string | null>(null);
  const [{ data: events = [], error }] = useSubscription<
    LiveSubscription,
    LiveEvent[],
    LiveSubscriptionVariables
  >(
    { query: EVENTS, variables: { id: paywall.id, types: filter === '*' ? null : [filter] }, pause: paused },
    (prev = [], next) => [next.paywallEvents, ...prev].slice(0, MAX),
  );
  return (
    <div className="stack">
      <PageHeader
        title="Live"
        subtitle="Events of this paywall as they happen (the paywallEvents subscription)."
        actions={
          <>
            <Select label="Show" value={filter} onChange={setFilter} options={FILTERS} />
            <Button onClick={() => setPaused(!paused)}>{paused ? 'Resume' : 'Pause'}</Button>
          </>
        }
      />
      <ErrorBanner message={errorMessage(error)} />
      <Card
        title={
          <>
            <span className={`live-dot ${paused ? 'off' : ''}`} aria-hidden="true" />
            {paused ? 'Paused' : 'Listening'}
          </>
        }
        actions={
          <span className="legend-note">
            {events.length} events since you opened this page (newest first)
          </span>
        }
      >
        {events.length === 0 ? (
          <Empty>Waiting for events… Deposits, charges and chat requests appear here as they happen.</Empty>
        ) : (
          <ul className="feed" aria-label="Live events" aria-live="polite">
            {events.map((e, i) => (
              <li key={e.id} className={i === 0 ? 'fresh' : undefined}>
                <span className="num-time">{time(e.createdAt)}</span>
                <div style={{ minWidth: 0 }}>
                  <div>
                    <Badge tone={tone(e.type)}>
                      <span className="type">{e.type}</span>
                    </Badge>
                  </div>
                  <div className="summary">{summary(e)}</div>
                  {open === e.id && <Json value={e} />}
                </div>
                <ToggleButton
                  open={open === e.id}
                  onToggle={() => setOpen(open === e.id ? null : e.id)}
                  labels={['Details', 'Hide']}
                />
              </li>
            ))}
          </ul>
        )}
      </Card>
    </div>
  );
}
