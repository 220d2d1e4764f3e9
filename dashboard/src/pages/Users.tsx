import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import { newIdempotencyKey } from '../format';
import type { PaywallSummary } from '../session';
import { Connections } from './Connections';
import {
  Badge,
  Button,
  Card,
  Empty,
  ErrorBanner,
  Field,
  Loading,
  Money,
  Notice,
  PageHeader,
  Time,
} from '../ui';

interface EndUser {
  id: string;
  externalId: string;
  balanceFormatted: string;
  held: string;
  connected: boolean;
  createdAt: string;
}
const USER_FIELDS = 'id externalId balanceFormatted held connected createdAt';

const USERS = `query Users($id: ID, $after: String) {
  users(paywallId: $id, first: 20, after: $after) { edges { node { ${USER_FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const FIND = `query FindUser($id: ID, $externalId: String!) { user(paywallId: $id, externalId: $externalId) { ${USER_FIELDS} } }`;

export function UsersPage({ paywall }: { paywall: PaywallSummary }) {
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const [search, setSearch] = useState('');
  const [searched, setSearched] = useState<string | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  const [list, refetchList] = useQuery<{
    users: { edges: { node: EndUser }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } };
  }>({
    query: USERS,
    variables: { id: paywall.id, after: cursors[cursors.length - 1] },
  });
  const [found] = useQuery<{ user: EndUser | null }>({
    query: FIND,
    variables: { id: paywall.id, externalId: searched ?? '' },
    pause: !searched,
  });
  // Choosing a user (again) re-reads their balance and ledger.
  const select = (externalId: string) => {
    setSelected(externalId);
    setVersion((v) => v + 1);
  };
  const users = searched
    ? found.data?.user
      ? [found.data.user]
      : []
    : (list.data?.users.edges.map((e) => e.node) ?? []);
  const page = list.data?.users.pageInfo;
  const submitSearch = (e: FormEvent) => {
    e.preventDefault();
    setSearched(search.trim() || null);
  };
  return (
    <div className="stack">
      <PageHeader
        title="Users"
        subtitle="End users of this paywall: balances, ledger, manual deposits and charges."
      />
      <div className="grid-users">
        <Card
          title="End users"
          actions={
            <form onSubmit={submitSearch} className="row row-end" role="search">
              <Field
                label="Find a user"
                value={search}
                onChange={setSearch}
                placeholder="external id, e.g. alice"
              />
              <Button type="submit">Search</Button>
              {searched && (
                <Button variant="ghost" onClick={() => (setSearched(null), setSearch(''))}>
                  Clear
                </Button>
              )}
            </form>
          }
        >
          <ErrorBanner message={errorMessage(searched ? found.error : list.error)} />
          {(searched ? found.fetching && !found.data : list.fetching && !list.data) ? (
            <Loading />
          ) : users.length === 0 ? (
            <Empty>
              {searched
                ? `No user “${searched}” on this paywall.`
                : 'No end users yet: they appear on their first request or deposit.'}
            </Empty>
          ) : (
            <div className="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>User</th>
                    <th className="num">Balance</th>
                    <th className="num">Held</th>
                    <th>Since</th>
                  </tr>
                </thead>
                <tbody>
                  {users.map((u) => (
                    <tr
                      key={u.id}
                      className={`clickable ${selected === u.externalId ? 'selected' : ''}`}
                      onClick={() => select(u.externalId)}
                    >
                      <td>
                        <button
                          type="button"
                          className="btn btn-ghost btn-sm"
                          onClick={(e) => {
                            e.stopPropagation();
                            select(u.externalId);
                          }}
                        >
                          {u.externalId}
                        </button>
                      </td>
                      <td className="num">
                        <Money value={u.balanceFormatted} />
                      </td>
                      <td className="num">
                        <Money value={u.held} />
                      </td>
                      <td>
                        <Time value={u.createdAt} dateOnly />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          {!searched && (cursors.length > 1 || page?.hasNextPage) && (
            <div className="row" style={{ marginTop: 10 }}>
              <Button
                className="btn-sm"
                disabled={cursors.length <= 1}
                onClick={() => setCursors(cursors.slice(0, -1))}
              >
                Previous
              </Button>
              <Button
                className="btn-sm"
                disabled={!page?.hasNextPage}
                onClick={() => setCursors([...cursors, page!.endCursor])}
              >
                Next
              </Button>
            </div>
          )}
        </Card>
        <div className="stack">
          <MoneyForms
            paywall={paywall}
            user={selected}
            onDone={(u) => (select(u), refetchList({ requestPolicy: 'network-only' }))}
          />
          {selected && <UserDetail key={`${selected}:${version}`} paywall={paywall} externalId={selected} />}
        </div>
      </div>
      {paywall.mode === 'SHARED' && <Connections paywall={paywall} />}
    </div>
  );
}

const DEPOSIT = `mutation Deposit($input: DepositInput!) { deposit(input: $input) { balanceFormatted replayed user { ${USER_FIELDS} } } }`;
const CHARGE = `mutation Charge($input: ChargeInput!) {
  charge(input: $input) { success message url balanceFormatted replayed user { ${USER_FIELDS} } }
}`;

function MoneyForms(props: { paywall: PaywallSummary; user: string | null; onDone: (user: string) => void }) {
  const [user, setUser] = useState(props.user ?? '');
  const [lastUser, setLastUser] = useState(props.user);
  if (props.user !== lastUser) {
    setLastUser(props.user);
    if (props.user) setUser(props.user);
  }
  const [amount, setAmount] = useState('');
  const [key, setKey] = useState(newIdempotencyKey);
  const [note, setNote] = useState<{ tone: 'success' | 'warn'; text: string } | null>(null);
  const [depositState, deposit] = useMutation(DEPOSIT);
  const [chargeState, charge] = useMutation(CHARGE);
  const error = errorMessage(depositState.error) ?? errorMessage(chargeState.error);
  const run = async (kind: 'deposit' | 'charge') => {
    setNote(null);
    const input = {
      paywallId: props.paywall.id,
      user: user.trim(),
      amount: amount.trim(),
      idempotencyKey: key.trim() || undefined,
    };
    if (kind === 'deposit') {
      const r = await deposit({ input });
      if (r.data) {
        const d = r.data.deposit;
        setNote({
          tone: 'success',
          text: `${d.replayed ? 'Replayed (same idempotency key): ' : ''}deposited ${amount} USDC to ${user}; balance ${d.balanceFormatted} USDC.`,
        });
      }
    } else {
      const r = await charge({ input });
      if (r.data) {
        const c = r.data.charge;
        setNote(
          c.success
            ? {
                tone: 'success',
                text: `${c.replayed ? 'Replayed: ' : ''}charged ${amount} USDC to ${user}; balance ${c.balanceFormatted} USDC.`,
              }
            : { tone: 'warn', text: `Charge refused: ${c.message}` },
        );
      }
    }
    setKey(newIdempotencyKey());
    props.onDone(user.trim());
  };
  return (
    <Card title="Deposit or charge">
      {props.paywall.mode === 'SHARED' && (
        <Notice tone="info">SHARED paywall: users fund their own wallet; deposits are refused.</Notice>
      )}
      <ErrorBanner message={error} />
      {note && <Notice tone={note.tone}>{note.text}</Notice>}
      <form
        className="stack"
        onSubmit={(e) => {
          e.preventDefault();
          void run('deposit');
        }}
      >
        <div className="row">
          <Field label="User" value={user} onChange={setUser} placeholder="external id" required />
          <Field
            label="Amount (USDC)"
            value={amount}
            onChange={setAmount}
            inputMode="decimal"
            placeholder="5.00"
            required
          />
        </div>
        <Field
          label="Idempotency key"
          value={key}
          onChange={setKey}
          hint="Sending the same key again replays the first answer; nothing is applied twice."
        />
        <div className="row">
          <Button
            type="submit"
            variant="primary"
            busy={depositState.fetching}
            disabled={props.paywall.mode === 'SHARED'}
          >
            Deposit
          </Button>
          <Button
            variant="danger"
            busy={chargeState.fetching}
            onClick={() => void run('charge')}
            disabled={!user.trim() || !amount.trim()}
          >
            Charge
          </Button>
        </div>
      </form>
    </Card>
  );
}

interface LedgerEntry {
  id: string;
  kind: string;
  amount: string;
  balanceAfter: string;
  metadata: Record<string, unknown>;
  createdAt: string;
}
const DETAIL = `query UserDetail($id: ID, $externalId: String!, $after: String) {
  user(paywallId: $id, externalId: $externalId) {
    ${USER_FIELDS} heldRaw connectedAt
    ledgerEntries(first: 10, after: $after) { edges { node { id kind amount balanceAfter metadata createdAt } } pageInfo { hasNextPage endCursor } }
  }
}`;

function UserDetail(props: { paywall: PaywallSummary; externalId: string }) {
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const [{ data, fetching, error }] = useQuery<{
    user:
      | (EndUser & {
          connectedAt: string | null;
          ledgerEntries: {
            edges: { node: LedgerEntry }[];
            pageInfo: { hasNextPage: boolean; endCursor: string | null };
          };
        })
      | null;
  }>({
    query: DETAIL,
    variables: { id: props.paywall.id, externalId: props.externalId, after: cursors[cursors.length - 1] },
  });
  const u = data?.user;
  return (
    <Card
      title={<>User {props.externalId}</>}
      actions={
        u && (u.connected ? <Badge tone="good">Connected</Badge> : <Badge tone="warn">Not connected</Badge>)
      }
    >
      <ErrorBanner message={errorMessage(error)} />
      {!data && fetching && <Loading />}
      {data && !u && <Empty>No such user yet.</Empty>}
      {u && (
        <div className="stack">
          <div className="grid-2">
            <div className="stat">
              <span className="label">Balance</span>
              <span className="value" data-testid="user-balance">
                <Money value={u.balanceFormatted} unit />
              </span>
            </div>
            <div className="stat">
              <span className="label">Held</span>
              <span className="value">
                <Money value={u.held} unit />
              </span>
            </div>
          </div>
          <div>
            <h3>Ledger</h3>
            {u.ledgerEntries.edges.length === 0 ? (
              <Empty>No ledger entries.</Empty>
            ) : (
              <div className="table-wrap">
                <table aria-label="Ledger">
                  <thead>
                    <tr>
                      <th>When</th>
                      <th>Kind</th>
                      <th className="num">Amount</th>
                      <th className="num">Balance after</th>
                    </tr>
                  </thead>
                  <tbody>
                    {u.ledgerEntries.edges.map(({ node: e }) => (
                      <tr key={e.id}>
                        <td>
                          <Time value={e.createdAt} />
                        </td>
                        <td>
                          <Badge tone={e.amount.startsWith('-') ? 'neutral' : 'good'}>{e.kind}</Badge>
                        </td>
                        <td className="num">
                          <Money value={e.amount} signed />
                        </td>
                        <td className="num">
                          <Money value={e.balanceAfter} />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
            {(cursors.length > 1 || u.ledgerEntries.pageInfo.hasNextPage) && (
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
                  disabled={!u.ledgerEntries.pageInfo.hasNextPage}
                  onClick={() => setCursors([...cursors, u.ledgerEntries.pageInfo.endCursor])}
                >
                  Older
                </Button>
              </div>
            )}
          </div>
        </div>
      )}
    </Card>
  );
}
