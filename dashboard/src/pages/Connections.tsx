import { useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { ConnectionRowFragment } from '../gql/graphql';
import type { PaywallSummary } from '../session';
import { Badge, Card, DataTable, ErrorBanner, Pager, timeColumn, usePages } from '../ui';

type Connection = ConnectionRowFragment;
graphql(`
  fragment ConnectionRow on Connection {
    id
    externalUserId
    walletUserId
    status
    connectedAt
    revokedAt
  }
`);
const CONNECTIONS = graphql(`
  query Connections($id: ID, $after: String) {
    paywall(id: $id) {
      id
      connections(first: 20, after: $after) {
        edges {
          node {
            ...ConnectionRow
          }
        }
        pageInfo {
          ...PageCursor
        }
      }
    }
  }
`);

/** SHARED mode: which wallet users authorized this paywall (newest first, revoked ones included). */
export function Connections({ paywall }: { paywall: PaywallSummary }) {
  const pages = usePages();
  const [{ data, fetching, error }] = useQuery({
    query: CONNECTIONS,
    variables: { id: paywall.id, after: pages.after },
  });
  const list = data?.paywall.connections;
  return (
    <Card title="Wallet connections">
      <ErrorBanner message={errorMessage(error)} />
      <DataTable
        label="Wallet connections"
        rows={list?.edges.map((e) => e.node) ?? []}
        rowKey={(c) => c.id}
        loading={!data && fetching}
        empty="No wallet user has connected yet: users get a connect link on their first request."
        columns={[
          { head: 'User', title: (c) => `wallet user ${c.walletUserId}`, cell: (c) => c.externalUserId },
          {
            head: 'Status',
            cell: (c) => (
              <Badge tone={c.status === 'ACTIVE' ? 'good' : 'neutral'}>{c.status.toLowerCase()}</Badge>
            ),
          },
          timeColumn('Connected', (c: Connection) => c.connectedAt),
          timeColumn('Revoked', (c: Connection) => c.revokedAt),
        ]}
      />
      <Pager pages={pages} pageInfo={list?.pageInfo} />
    </Card>
  );
}
