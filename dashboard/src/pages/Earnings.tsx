import { type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { EarningsMovementFragment, WithdrawalRowFragment } from '../gql/graphql';
import type { PaywallSummary } from '../session';
import {
  Badge,
  Button,
  Card,
  DataTable,
  ErrorBanner,
  FormFields,
  Loading,
  Money,
  moneyColumn,
  PageHeader,
  Stat,
  Time,
  timeColumn,
  useForm,
} from '../ui';

type Movement = EarningsMovementFragment;
type Withdrawal = WithdrawalRowFragment;
graphql(`
  fragment WithdrawalRow on Withdrawal {
    id
    amount
    destination
    status
    failureReason
    createdAt
  }
`);
graphql(`
  fragment EarningsMovement on EarningsEntry {
    id
    kind
    amount
    model
    createdAt
  }
`);
const EARNINGS = graphql(`
  query Earnings($id: ID) {
    paywall(id: $id) {
      id
      earnings {
        available
        pending
        withdrawn
        fees
      }
      withdrawals(first: 20) {
        edges {
          node {
            ...WithdrawalRow
          }
        }
      }
      earningsHistory(first: 20) {
        edges {
          node {
            ...EarningsMovement
          }
        }
      }
    }
  }
`);
const REQUEST = graphql(`
  mutation Withdraw($input: RequestWithdrawalInput!) {
    requestWithdrawal(input: $input) {
      ...WithdrawalRow
    }
  }
`);
const CANCEL = graphql(`
  mutation Cancel($paywallId: ID, $id: ID!) {
    cancelWithdrawal(paywallId: $paywallId, id: $id) {
      ...WithdrawalRow
    }
  }
`);

const tone = (s: string) =>
  s === 'PAID' ? 'good' : s === 'FAILED' ? 'bad' : s === 'PENDING' ? 'warn' : 'neutral';

export function EarningsPage({ paywall }: { paywall: PaywallSummary }) {
  const [{ data, fetching, error }, refetch] = useQuery({ query: EARNINGS, variables: { id: paywall.id } });
  const { values, setValues, set } = useForm({ amount: '', destination: '' });
  const { amount, destination } = values;
  const [rState, request] = useMutation(REQUEST);
  const [cState, cancel] = useMutation(CANCEL);
  const reload = () => refetch({ requestPolicy: 'network-only' });
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await request({
      input: { paywallId: paywall.id, amount: amount.trim(), destination: destination.trim() },
    });
    if (r.data) {
      setValues((v) => ({ ...v, amount: '' }));
      reload();
    }
  };
  const e = data?.paywall.earnings;
  return (
    <div className="stack">
      <PageHeader title="Earnings" subtitle="SHARED mode: what wallet users paid you, less platform fees." />
      <ErrorBanner message={errorMessage(error) ?? errorMessage(cState.error)} />
      {!data && fetching && <Loading />}
      {e && (
        <div className="grid-4">
          {(
            [
              ['Available', e.available],
              ['Pending withdrawal', e.pending],
              ['Withdrawn', e.withdrawn],
              ['Platform fees', e.fees],
            ] as const
          ).map(([label, v]) => (
            <Stat card key={label} label={label} sub="USDC">
              <Money value={v} />
            </Stat>
          ))}
        </div>
      )}
      <div className="grid-2" style={{ alignItems: 'start' }}>
        <Card title="Request a withdrawal">
          <ErrorBanner message={errorMessage(rState.error)} />
          <form className="stack" onSubmit={submit}>
            <FormFields
              values={values}
              set={set}
              layout={[
                { name: 'amount', label: 'Amount (USDC)', inputMode: 'decimal', required: true },
                {
                  name: 'destination',
                  label: 'Destination',
                  required: true,
                  hint: 'A bank reference or an address; the operator pays it out.',
                },
              ]}
            />
            <div>
              <Button type="submit" variant="primary" busy={rState.fetching}>
                Request withdrawal
              </Button>
            </div>
          </form>
        </Card>
        <Card title="Withdrawals">
          <DataTable
            rows={data?.paywall.withdrawals.edges.map((e) => e.node) ?? []}
            rowKey={(w) => w.id}
            empty="No withdrawals yet."
            columns={[
              {
                head: 'Requested',
                cell: (w) => (
                  <>
                    <Time value={w.createdAt} />
                    <div className="muted">{w.destination}</div>
                  </>
                ),
              },
              moneyColumn('Amount', (w: Withdrawal) => w.amount),
              {
                head: 'Status',
                // The cancel button under the badge, not in a column of its own: the card is half the page.
                cell: (w) => (
                  <>
                    <Badge tone={tone(w.status)}>{w.status}</Badge>
                    {w.failureReason && <div className="muted">{w.failureReason}</div>}
                    {w.status === 'PENDING' && (
                      <div className="cell-action">
                        <Button
                          className="btn-sm"
                          busy={cState.fetching}
                          onClick={async () => (await cancel({ paywallId: paywall.id, id: w.id }), reload())}
                        >
                          Cancel
                        </Button>
                      </div>
                    )}
                  </>
                ),
              },
            ]}
          />
        </Card>
      </div>
      <Card title="Recent movements">
        <DataTable
          label="Earnings movements"
          rows={data?.paywall.earningsHistory.edges.map((e) => e.node) ?? []}
          rowKey={(m) => m.id}
          empty="No earnings yet: charges of connected wallet users land here, less the platform fee."
          columns={[
            timeColumn('When', (m: Movement) => m.createdAt),
            { head: 'Kind', cell: (m) => <Badge>{m.kind.replace('_', ' ')}</Badge> },
            { head: 'Model', className: 'mono', cell: (m) => m.model ?? '—' },
            moneyColumn('Amount', (m: Movement) => m.amount, { signed: true }),
          ]}
        />
      </Card>
    </div>
  );
}
