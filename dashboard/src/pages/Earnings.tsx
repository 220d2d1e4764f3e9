import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import type { PaywallSummary } from '../session';
import { Badge, Button, Card, Empty, ErrorBanner, Field, Loading, Money, PageHeader, Time } from '../ui';

interface Withdrawal {
  id: string;
  amount: string;
  destination: string;
  status: string;
  failureReason: string | null;
  createdAt: string;
}
const W = 'id amount destination status failureReason createdAt';
const EARNINGS = `query Earnings($id: ID) {
  paywall(id: $id) {
    id
    earnings { available pending withdrawn fees }
    withdrawals(first: 20) { edges { node { ${W} } } }
    earningsHistory(first: 20) { edges { node { id kind amount model createdAt } } }
  }
}`;
const REQUEST = `mutation Withdraw($input: RequestWithdrawalInput!) { requestWithdrawal(input: $input) { ${W} } }`;
const CANCEL = `mutation Cancel($paywallId: ID, $id: ID!) { cancelWithdrawal(paywallId: $paywallId, id: $id) { ${W} } }`;

const tone = (s: string) =>
  s === 'PAID' ? 'good' : s === 'FAILED' ? 'bad' : s === 'PENDING' ? 'warn' : 'neutral';

export function EarningsPage({ paywall }: { paywall: PaywallSummary }) {
  const [{ data, fetching, error }, refetch] = useQuery<{
    paywall: {
      earnings: { available: string; pending: string; withdrawn: string; fees: string };
      withdrawals: { edges: { node: Withdrawal }[] };
      earningsHistory: {
        edges: {
          node: { id: string; kind: string; amount: string; model: string | null; createdAt: string };
        }[];
      };
    };
  }>({ query: EARNINGS, variables: { id: paywall.id } });
  const [amount, setAmount] = useState('');
  const [destination, setDestination] = useState('');
  const [rState, request] = useMutation(REQUEST);
  const [cState, cancel] = useMutation(CANCEL);
  const reload = () => refetch({ requestPolicy: 'network-only' });
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await request({
      input: { paywallId: paywall.id, amount: amount.trim(), destination: destination.trim() },
    });
    if (r.data) {
      setAmount('');
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
            <div className="card stat" key={label}>
              <span className="label">{label}</span>
              <span className="value">
                <Money value={v} />
              </span>
              <span className="sub">USDC</span>
            </div>
          ))}
        </div>
      )}
      <div className="grid-2" style={{ alignItems: 'start' }}>
        <Card title="Request a withdrawal">
          <ErrorBanner message={errorMessage(rState.error)} />
          <form className="stack" onSubmit={submit}>
            <Field label="Amount (USDC)" value={amount} onChange={setAmount} inputMode="decimal" required />
            <Field
              label="Destination"
              value={destination}
              onChange={setDestination}
              required
              hint="A bank reference or an address; the operator pays it out."
            />
            <div>
              <Button type="submit" variant="primary" busy={rState.fetching}>
                Request withdrawal
              </Button>
            </div>
          </form>
        </Card>
        <Card title="Withdrawals">
          {!data?.paywall.withdrawals.edges.length ? (
            <Empty>No withdrawals yet.</Empty>
          ) : (
            <div className="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th>Requested</th>
                    <th className="num">Amount</th>
                    <th>Status</th>
                    <th />
                  </tr>
                </thead>
                <tbody>
                  {data.paywall.withdrawals.edges.map(({ node: w }) => (
                    <tr key={w.id}>
                      <td>
                        <Time value={w.createdAt} />
                        <div className="muted">{w.destination}</div>
                      </td>
                      <td className="num">
                        <Money value={w.amount} />
                      </td>
                      <td>
                        <Badge tone={tone(w.status)}>{w.status}</Badge>
                        {w.failureReason && <div className="muted">{w.failureReason}</div>}
                      </td>
                      <td className="actions">
                        {w.status === 'PENDING' && (
                          <Button
                            className="btn-sm"
                            busy={cState.fetching}
                            onClick={async () => (
                              await cancel({ paywallId: paywall.id, id: w.id }),
                              reload()
                            )}
                          >
                            Cancel
                          </Button>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </Card>
      </div>
      <Card title="Recent movements">
        {!data?.paywall.earningsHistory.edges.length ? (
          <Empty>No earnings yet: charges of connected wallet users land here, less the platform fee.</Empty>
        ) : (
          <div className="table-wrap">
            <table aria-label="Earnings movements">
              <thead>
                <tr>
                  <th>When</th>
                  <th>Kind</th>
                  <th>Model</th>
                  <th className="num">Amount</th>
                </tr>
              </thead>
              <tbody>
                {data.paywall.earningsHistory.edges.map(({ node: m }) => (
                  <tr key={m.id}>
                    <td>
                      <Time value={m.createdAt} />
                    </td>
                    <td>
                      <Badge>{m.kind.replace('_', ' ')}</Badge>
                    </td>
                    <td className="mono">{m.model ?? '—'}</td>
                    <td className="num">
                      <Money value={m.amount} signed />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Card>
    </div>
  );
}
