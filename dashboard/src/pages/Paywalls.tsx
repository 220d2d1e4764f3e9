import { useState, type FormEvent } from 'react';
import { useMutation, type CombinedError } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { WalletMode } from '../gql/graphql';
import { Link } from '../router';
import type { PaywallSummary } from '../session';
import {
  Badge,
  Button,
  Card,
  DataTable,
  ErrorBanner,
  Notice,
  FormFields,
  PageHeader,
  SecretOnce,
  timeColumn,
  useForm,
} from '../ui';

type Row = PaywallSummary;

const CREATE = graphql(`
  mutation CreatePaywall($input: CreatePaywallInput!) {
    createPaywall(input: $input) {
      apiKey
      paywall {
        ...PaywallSummary
      }
    }
  }
`);
const ROTATE = graphql(`
  mutation RotateKey($id: ID) {
    rotatePaywallSecret(paywallId: $id) {
      apiKey
      paywall {
        id
        apiKeyLastFour
      }
    }
  }
`);
const ARCHIVE = graphql(`
  mutation Archive($id: ID) {
    archivePaywall(paywallId: $id) {
      id
      archivedAt
    }
  }
`);

export function PaywallsPage(props: { paywalls: Row[]; error?: CombinedError; refetch: () => void }) {
  const { values, setValues, set } = useForm({ name: '', mode: 'DEFAULT', description: '' });
  const { name, mode, description } = values;
  const [secret, setSecret] = useState<{ title: string; key: string } | null>(null);
  const [createState, create] = useMutation(CREATE);
  const [rotateState, rotate] = useMutation(ROTATE);
  const [archiveState, archive] = useMutation(ARCHIVE);
  const [actionError, setActionError] = useState<string | null>(null);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await create({
      input: { name: name.trim(), mode: mode as WalletMode, description: description.trim() || undefined },
    });
    if (r.data) {
      setSecret({
        title: `API key of ${r.data.createPaywall.paywall.name}`,
        key: r.data.createPaywall.apiKey,
      });
      setValues((v) => ({ ...v, name: '', description: '' }));
      props.refetch();
    }
  };
  const active = props.paywalls.filter((p) => !p.archivedAt);
  const archived = props.paywalls.filter((p) => p.archivedAt);
  return (
    <div className="stack">
      <PageHeader
        title="Paywalls"
        subtitle="Each paywall has one API key, one wallet mode, its prices and settings."
      />
      <ErrorBanner message={errorMessage(props.error) ?? actionError} />
      {secret && <SecretOnce title={secret.title} secret={secret.key} onDone={() => setSecret(null)} />}
      <Card title="Your paywalls">
        {props.paywalls.length >= 100 && (
          <Notice tone="info">
            Showing your first 100 paywalls, oldest first (archived ones included). Open a later one by its
            link, or list them all through the API (`paywalls(first, after)`).
          </Notice>
        )}
        <DataTable
          rows={[...active, ...archived]}
          rowKey={(p) => p.id}
          empty="No paywalls yet. Create the first one below."
          columns={[
            { head: 'Name', cell: (p) => <Link to={`/p/${p.id}/overview`}>{p.name}</Link> },
            {
              head: 'Mode',
              cell: (p) => <Badge tone={p.mode === 'SHARED' ? 'info' : 'neutral'}>{p.mode}</Badge>,
            },
            { head: 'API key', className: 'mono', cell: (p) => `••••${p.apiKeyLastFour}` },
            timeColumn('Created', (p: Row) => p.createdAt),
            {
              head: 'Status',
              cell: (p) => (p.archivedAt ? <Badge>Archived</Badge> : <Badge tone="good">Active</Badge>),
            },
            {
              className: 'actions',
              cell: (p) =>
                !p.archivedAt && (
                  <>
                    <Button
                      className="btn-sm"
                      busy={rotateState.fetching}
                      aria-label={`Rotate the key of ${p.name}`}
                      onClick={async () => {
                        if (
                          !confirm(
                            `Rotate the API key of “${p.name}”? The current key stops working at once.`,
                          )
                        )
                          return;
                        const r = await rotate({ id: p.id });
                        setActionError(errorMessage(r.error));
                        if (r.data)
                          setSecret({
                            title: `New API key of ${p.name}`,
                            key: r.data.rotatePaywallSecret.apiKey,
                          });
                      }}
                    >
                      Rotate key
                    </Button>
                    <Button
                      className="btn-sm"
                      variant="danger"
                      busy={archiveState.fetching}
                      aria-label={`Archive ${p.name}`}
                      onClick={async () => {
                        if (!confirm(`Archive “${p.name}”? Its API key stops working; the data is kept.`))
                          return;
                        const r = await archive({ id: p.id });
                        setActionError(errorMessage(r.error));
                        props.refetch();
                      }}
                    >
                      Archive
                    </Button>
                  </>
                ),
            },
          ]}
        />
      </Card>
      <Card title="New paywall">
        <form onSubmit={submit} className="stack">
          <ErrorBanner message={errorMessage(createState.error)} />
          <FormFields
            values={values}
            set={set}
            layout={[
              [
                { name: 'name', label: 'Name', required: true, placeholder: 'My AI app' },
                {
                  name: 'mode',
                  label: 'Wallet mode',
                  options: [
                    { value: 'DEFAULT', label: 'DEFAULT — you fund balances' },
                    { value: 'SHARED', label: 'SHARED — hosted user wallet' },
                  ],
                },
              ],
              {
                name: 'description',
                label: 'Description',
                hint: 'Shown to wallet users on the consent page (SHARED).',
              },
            ]}
          />
          <div>
            <Button type="submit" variant="primary" busy={createState.fetching}>
              Create paywall
            </Button>
          </div>
        </form>
      </Card>
    </div>
  );
}
