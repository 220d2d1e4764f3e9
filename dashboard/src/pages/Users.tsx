import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { EndUserRowFragment, LedgerEntryRowFragment } from '../gql/graphql';
import { exactUsdc, newIdempotencyKey, usdc } from '../format';
import type { PaywallSummary } from '../session';
import { Connections } from './Connections';
import { UserKeys } from './UserKeys';
import {
  Badge,
  Button,
  Card,
  DataTable,
  Empty,
  ErrorBanner,
  Field,
  FormFields,
  Loading,
  Money,
  moneyColumn,
  Notice,
  PageHeader,
  Pager,
  Stat,
  timeColumn,
  useForm,
  usePages,
} from '../ui';

type EndUser = EndUserRowFragment;
graphql(`
  fragment EndUserRow on EndUser {
    id
    externalId
    balanceFormatted
    held
    connected
    createdAt
  }
`);
const USERS = graphql(`
  query Users($id: ID, $after: String) {
    users(paywallId: $id, first: 20, after: $after) {
      edges {
        node {
          ...EndUserRow
        }
      }
      pageInfo {
        ...PageCursor
      }
    }
  }
`);
const FIND = graphql(`
  query FindUser($id: ID, $externalId: String!) {
    user(paywallId: $id, externalId: $externalId) {
      ...EndUserRow
    }
  }
`);

export function UsersPage({ paywall }: { paywall: PaywallSummary }) {
  const pages = usePages();
  const [search, setSearch] = useState('');
  const [searched, setSearched] = useState<string | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  const [list, refetchList] = useQuery({
    query: USERS,
    variables: { id: paywall.id, after: pages.after },
  });
  const [found] = useQuery({
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
          <DataTable
            rows={users}
            rowKey={(u) => u.id}
            loading={searched ? found.fetching && !found.data : list.fetching && !list.data}
            empty={
              searched
                ? `No user “${searched}” on this paywall.`
                : 'No end users yet: they appear on their first request or deposit.'
            }
            onRowClick={(u) => select(u.externalId)}
            selected={(u) => selected === u.externalId}
            columns={[
              {
                head: 'User',
                cell: (u) => (
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
                ),
              },
              moneyColumn('Balance', (u: EndUser) => u.balanceFormatted),
              moneyColumn('Held', (u: EndUser) => u.held),
              timeColumn('Since', (u: EndUser) => u.createdAt, { dateOnly: true }),
            ]}
          />
          {!searched && <Pager pages={pages} pageInfo={page} labels={['Previous', 'Next']} />}
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
      <UserKeys paywall={paywall} user={selected} />
      {paywall.mode === 'SHARED' && <Connections paywall={paywall} />}
    </div>
  );
}

const DEPOSIT = graphql(`
  mutation Deposit($input: DepositInput!) {
    deposit(input: $input) {
      balanceFormatted
      replayed
      user {
        ...EndUserRow
      }
    }
  }
`);
const CHARGE = graphql(`
  mutation Charge($input: ChargeInput!) {
    charge(input: $input) {
      success
      message
      url
      balanceFormatted
      replayed
      user {
        ...EndUserRow
      }
    }
  }
`);

function MoneyForms(props: { paywall: PaywallSummary; user: string | null; onDone: (user: string) => void }) {
  const { values: f, setValues } = useForm(() => ({
    user: props.user ?? '',
    amount: '',
    key: newIdempotencyKey(),
  }));
  const { user, amount, key } = f;
  // The idempotency key stays until the user or the amount changes: a second click on the same form (a
  // double click, or "did it work?") is then the same request, answered as a replay and applied once.
  const set = (name: 'user' | 'amount' | 'key') => (v: string) =>
    setValues((prev) =>
      name !== 'key' && prev[name] !== v
        ? { ...prev, [name]: v, key: newIdempotencyKey() }
        : { ...prev, [name]: v },
    );
  const [lastUser, setLastUser] = useState(props.user);
  if (props.user !== lastUser) {
    setLastUser(props.user);
    if (props.user && props.user !== f.user) setValues({ ...f, user: props.user, key: newIdempotencyKey() });
  }
  const [note, setNote] = useState<{ tone: 'success' | 'warn'; text: string } | null>(null);
  const [depositState, deposit] = useMutation(DEPOSIT);
  const [chargeState, charge] = useMutation(CHARGE);
  const error = errorMessage(depositState.error) ?? errorMessage(chargeState.error);
  const busy = depositState.fetching || chargeState.fetching;
  const run = async (kind: 'deposit' | 'charge') => {
    if (busy) return; // one request at a time from this form
    setNote(null);
    const who = user.trim();
    const exact = exactUsdc(amount);
    const input = {
      paywallId: props.paywall.id,
      user: who,
      amount: amount.trim(),
      idempotencyKey: key.trim() || undefined,
    };
    if (kind === 'deposit') {
      const r = await deposit({ input });
      if (r.data) {
        const d = r.data.deposit;
        setNote({
          tone: d.replayed ? 'warn' : 'success',
          text: d.replayed
            ? `Already applied: ${exact} USDC was deposited to ${who} with this idempotency key; nothing was deposited again. Balance ${usdc(d.balanceFormatted)} USDC.`
            : `Deposited ${exact} USDC to ${who}. Balance ${usdc(d.balanceFormatted)} USDC.`,
        });
      }
    } else {
      const r = await charge({ input });
      if (r.data) {
        const c = r.data.charge;
        setNote(
          !c.success
            ? { tone: 'warn', text: `Charge refused: ${c.message}` }
            : c.replayed
              ? {
                  tone: 'warn',
                  text: `Already applied: ${exact} USDC was charged to ${who} with this idempotency key; nothing was charged again. Balance ${usdc(c.balanceFormatted)} USDC.`,
                }
              : {
                  tone: 'success',
                  text: `Charged ${exact} USDC to ${who}. Balance ${usdc(c.balanceFormatted)} USDC.`,
                },
        );
      }
    }
    props.onDone(who);
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
        <FormFields
          values={f}
          set={set}
          layout={[
            [
              { name: 'user', label: 'User', placeholder: 'external id', required: true },
              {
                name: 'amount',
                label: 'Amount (USDC)',
                inputMode: 'decimal',
                placeholder: '5.00',
                required: true,
              },
            ],
            {
              name: 'key',
              label: 'Idempotency key',
              hint: 'Kept until you change the user or the amount: sending the form again replays the first answer, nothing is applied twice.',
            },
          ]}
        />
        <div className="row">
          <Button
            type="submit"
            variant="primary"
            busy={depositState.fetching}
            disabled={props.paywall.mode === 'SHARED' || chargeState.fetching}
          >
            Deposit
          </Button>
          <Button
            variant="danger"
            busy={chargeState.fetching}
            onClick={() => void run('charge')}
            disabled={!user.trim() || !amount.trim() || depositState.fetching}
          >
            Charge
          </Button>
        </div>
      </form>
    </Card>
  );
}

type LedgerEntry = LedgerEntryRowFragment;
graphql(`
  fragment LedgerEntryRow on LedgerEntry {
    id
    kind
    amount
    balanceAfter
    chargeId
    refundable
    refunded
    metadata
    createdAt
  }
`);
const REFUND = graphql(`
  mutation RefundCharge($input: RefundChargeInput!) {
    refundCharge(input: $input) {
      id
      chargeId
      amount
      reason
      createdAt
    }
  }
`);

const isZeroUsdc = (v: string | null | undefined) => !v || /^0(\.0*)?$/.test(v);

/**
 * The Refund form of one charge (docs/reference.md §16 "Refunds"): the amount, prefilled with what may
 * still be refunded, and an optional reason. The idempotency key stays until the amount or the reason
 * changes, so a second click is the same request and refunds once.
 */
function RefundForm(props: {
  paywall: PaywallSummary;
  entry: LedgerEntry;
  onDone: (text: string) => void;
  onCancel: () => void;
}) {
  const rest = props.entry.refundable ?? '0';
  const [amount, setAmount] = useState(rest);
  const [reason, setReason] = useState('');
  const [key, setKey] = useState(newIdempotencyKey);
  const [state, refund] = useMutation(REFUND);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (state.fetching) return;
    const r = await refund({
      input: {
        paywallId: props.paywall.id,
        chargeId: props.entry.chargeId!,
        amount: amount.trim(),
        reason: reason.trim() || null,
        idempotencyKey: key,
      },
    });
    if (r.data) props.onDone(`Refunded ${exactUsdc(r.data.refundCharge.amount)} USDC.`);
  };
  return (
    <form className="stack refund-form" onSubmit={submit} aria-label="Refund charge">
      <h3>Refund charge</h3>
      <p className="muted">
        Charge <code>{props.entry.chargeId}</code>: up to {exactUsdc(rest)} USDC can be given back to the
        account that paid it
        {props.paywall.mode === 'SHARED' ? ', from your earnings and the platform fee in proportion' : ''}.
      </p>
      <ErrorBanner message={errorMessage(state.error)} />
      <div className="grid-2">
        <Field
          label="Refund amount (USDC)"
          inputMode="decimal"
          value={amount}
          onChange={(v) => {
            setAmount(v);
            setKey(newIdempotencyKey());
          }}
          required
        />
        <Field
          label="Reason"
          placeholder="shown to the user"
          value={reason}
          onChange={(v) => {
            setReason(v);
            setKey(newIdempotencyKey());
          }}
        />
      </div>
      <div className="row">
        <Button type="submit" variant="danger" busy={state.fetching} disabled={!amount.trim()}>
          Refund {amount.trim() || '…'} USDC
        </Button>
        <Button onClick={props.onCancel} disabled={state.fetching}>
          Cancel
        </Button>
      </div>
    </form>
  );
}
const DETAIL = graphql(`
  query UserDetail($id: ID, $externalId: String!, $after: String) {
    user(paywallId: $id, externalId: $externalId) {
      ...EndUserRow
      heldRaw
      connectedAt
      ledgerEntries(first: 10, after: $after) {
        edges {
          node {
            ...LedgerEntryRow
          }
        }
        pageInfo {
          ...PageCursor
        }
      }
    }
  }
`);

function UserDetail(props: { paywall: PaywallSummary; externalId: string }) {
  const pages = usePages();
  const [{ data, fetching, error }, reexecute] = useQuery({
    query: DETAIL,
    variables: { id: props.paywall.id, externalId: props.externalId, after: pages.after },
  });
  const [refunding, setRefunding] = useState<LedgerEntry | null>(null);
  const [refundNote, setRefundNote] = useState<string | null>(null);
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
            <Stat label="Balance" testId="user-balance">
              <Money value={u.balanceFormatted} unit />
            </Stat>
            <Stat label="Held">
              <Money value={u.held} unit />
            </Stat>
          </div>
          <div>
            <h3>Ledger</h3>
            <DataTable
              label="Ledger"
              rows={u.ledgerEntries.edges.map((e) => e.node)}
              rowKey={(e) => e.id}
              empty="No ledger entries."
              columns={[
                timeColumn('When', (e: LedgerEntry) => e.createdAt),
                {
                  head: 'Kind',
                  cell: (e) => <Badge tone={e.amount.startsWith('-') ? 'neutral' : 'good'}>{e.kind}</Badge>,
                },
                moneyColumn('Amount', (e: LedgerEntry) => e.amount, { signed: true }),
                moneyColumn('Balance after', (e: LedgerEntry) => e.balanceAfter),
                {
                  head: 'Refund',
                  cell: (e) =>
                    e.kind === 'refund' ? (
                      <span className="muted refund-of">
                        {typeof e.metadata?.reason === 'string' ? e.metadata.reason : 'Refund'}
                      </span>
                    ) : e.refundable == null ? null : (
                      <span className="row refund-cell">
                        {!isZeroUsdc(e.refunded) && (
                          <span className="muted" data-testid="refunded">
                            Refunded <Money value={e.refunded} />
                          </span>
                        )}
                        {!isZeroUsdc(e.refundable) && (
                          <Button
                            className="btn-sm"
                            aria-label={`Refund ${exactUsdc(e.refundable!)} USDC of this charge`}
                            onClick={() => {
                              setRefundNote(null);
                              setRefunding(e);
                            }}
                          >
                            Refund
                          </Button>
                        )}
                      </span>
                    ),
                },
              ]}
            />
            <Pager pages={pages} pageInfo={u.ledgerEntries.pageInfo} />
            {refundNote && <Notice tone="success">{refundNote}</Notice>}
            {refunding && (
              <RefundForm
                key={refunding.id}
                paywall={props.paywall}
                entry={refunding}
                onCancel={() => setRefunding(null)}
                onDone={(text) => {
                  setRefunding(null);
                  setRefundNote(text);
                  reexecute({ requestPolicy: 'network-only' });
                }}
              />
            )}
          </div>
        </div>
      )}
    </Card>
  );
}
