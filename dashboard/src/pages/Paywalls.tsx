import { useState, type FormEvent } from 'react';
import { useMutation, type CombinedError } from 'urql';
import { errorMessage } from '../api';
import { Link } from '../router';
import type { PaywallSummary } from '../session';
import { Badge, Button, Card, Empty, ErrorBanner, Field, PageHeader, SecretOnce, Select, Time } from '../ui';

type Row = PaywallSummary & { apiKeyLastFour: string; createdAt: string };

const CREATE = `mutation CreatePaywall($input: CreatePaywallInput!) {
  createPaywall(input: $input) { apiKey paywall { id name mode archivedAt apiKeyLastFour createdAt } }
}`;
const ROTATE = `mutation RotateKey($id: ID) { rotatePaywallSecret(paywallId: $id) { apiKey paywall { id apiKeyLastFour } } }`;
const ARCHIVE = `mutation Archive($id: ID) { archivePaywall(paywallId: $id) { id archivedAt } }`;

export function PaywallsPage(props: { paywalls: Row[]; error?: CombinedError; refetch: () => void }) {
  const [name, setName] = useState('');
  const [mode, setMode] = useState('DEFAULT');
  const [description, setDescription] = useState('');
  const [secret, setSecret] = useState<{ title: string; key: string } | null>(null);
  const [createState, create] = useMutation(CREATE);
  const [rotateState, rotate] = useMutation(ROTATE);
  const [archiveState, archive] = useMutation(ARCHIVE);
  const [actionError, setActionError] = useState<string | null>(null);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await create({
      input: { name: name.trim(), mode, description: description.trim() || undefined },
    });
    if (r.data) {
      setSecret({
        title: `API key of ${r.data.createPaywall.paywall.name}`,
        key: r.data.createPaywall.apiKey,
      });
      setName('');
      setDescription('');
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
        {props.paywalls.length === 0 ? (
          <Empty>No paywalls yet. Create the first one below.</Empty>
        ) : (
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Mode</th>
                  <th>API key</th>
                  <th>Created</th>
                  <th>Status</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {[...active, ...archived].map((p) => (
                  <tr key={p.id}>
                    <td>
                      <Link to={`/p/${p.id}/overview`}>{p.name}</Link>
                    </td>
                    <td>
                      <Badge tone={p.mode === 'SHARED' ? 'info' : 'neutral'}>{p.mode}</Badge>
                    </td>
                    <td className="mono">••••{p.apiKeyLastFour}</td>
                    <td>
                      <Time value={p.createdAt} />
                    </td>
                    <td>{p.archivedAt ? <Badge>Archived</Badge> : <Badge tone="good">Active</Badge>}</td>
                    <td className="actions">
                      {!p.archivedAt && (
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
                              if (
                                !confirm(`Archive “${p.name}”? Its API key stops working; the data is kept.`)
                              )
                                return;
                              const r = await archive({ id: p.id });
                              setActionError(errorMessage(r.error));
                              props.refetch();
                            }}
                          >
                            Archive
                          </Button>
                        </>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Card>
      <Card title="New paywall">
        <form onSubmit={submit} className="stack">
          <ErrorBanner message={errorMessage(createState.error)} />
          <div className="row">
            <Field label="Name" value={name} onChange={setName} required placeholder="My AI app" />
            <Select
              label="Wallet mode"
              value={mode}
              onChange={setMode}
              options={[
                { value: 'DEFAULT', label: 'DEFAULT — you fund balances' },
                { value: 'SHARED', label: 'SHARED — hosted user wallet' },
              ]}
            />
          </div>
          <Field
            label="Description"
            value={description}
            onChange={setDescription}
            hint="Shown to wallet users on the consent page (SHARED)."
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
