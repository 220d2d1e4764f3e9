import { useState } from 'react';
import { useQuery } from 'urql';
import { errorMessage } from '../api';
import type { PaywallSummary } from '../session';
import { Badge, Button, Card, Empty, ErrorBanner, Loading, Time } from '../ui';

interface Connection {
  id: string;
  externalUserId: string;
  walletUserId: string;
  status: string;
  connectedAt: string;
  revokedAt: string | null;
}
const CONNECTIONS = `query Connections($id: ID, $after: String) {
  paywall(id: $id) {
    id
    connections(first: 20, after: $after) {
      edges { node { id externalUserId walletUserId status connectedAt revokedAt } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

/** SHARED mode: which wallet users authorized this paywall (newest first, revoked ones included). */
export function Connections({ paywall }: { paywall: PaywallSummary }) {
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const [{ data, fetching, error }] = useQuery<{
    paywall: {
      connections: {
        edges: { node: Connection }[];
        pageInfo: { hasNextPage: boolean; endCursor: string | null };
      };
    };
  }>({ query: CONNECTIONS, variables: { id: paywall.id, after: cursors[cursors.length - 1] } });
  const list = data?.paywall.connections;
  return (
    <Card title="Wallet connections">
      <ErrorBanner message={errorMessage(error)} />
      {!data && fetching ? (
        <Loading />
      ) : !list?.edges.length ? (
        <Empty>No wallet user has connected yet: users get a connect link on their first request.</Empty>
      ) : (
        <div className="table-wrap">
          <table aria-label="Wallet connections">
            <thead>
              <tr>
                <th>User</th>
                <th>Status</th>
                <th>Connected</th>
                <th>Revoked</th>
              </tr>
            </thead>
            <tbody>
              {list.edges.map(({ node: c }) => (
                <tr key={c.id}>
                  <td title={`wallet user ${c.walletUserId}`}>{c.externalUserId}</td>
                  <td>
                    <Badge tone={c.status === 'ACTIVE' ? 'good' : 'neutral'}>{c.status.toLowerCase()}</Badge>
                  </td>
                  <td>
                    <Time value={c.connectedAt} />
                  </td>
                  <td>
                    <Time value={c.revokedAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {(cursors.length > 1 || list?.pageInfo.hasNextPage) && (
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
            disabled={!list?.pageInfo.hasNextPage}
            onClick={() => setCursors([...cursors, list!.pageInfo.endCursor])}
          >
            Older
          </Button>
        </div>
      )}
    </Card>
  );
}
