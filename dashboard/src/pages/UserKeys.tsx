import { useState, type FormEvent } from 'react';
import { useMutation, useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { UserKeyLimitPeriod, UserKeyRowFragment } from '../gql/graphql';
import type { PaywallSummary } from '../session';
import {
  Badge,
  Button,
  Card,
  DataTable,
  ErrorBanner,
  FormFields,
  SecretOnce,
  timeColumn,
  useForm,
} from '../ui';

type UserKey = UserKeyRowFragment;
graphql(`
  fragment UserKeyRow on UserKey {
    id
    name
    externalUserId
    lastFour
    createdAt
    lastUsedAt
    expiresAt
    revokedAt
    limit {
      amount
      period
      spent
      resetsAt
    }
  }
`);
const USER_KEYS = graphql(`
  query UserKeys($id: ID, $user: String) {
    paywall(id: $id) {
      id
      userKeys(externalUserId: $user) {
        ...UserKeyRow
      }
    }
  }
`);
const CREATE_KEY = graphql(`
  mutation CreateUserKey($input: CreateUserKeyInput!) {
    createUserKey(input: $input) {
      key
      userKey {
        ...UserKeyRow
      }
    }
  }
`);
const REVOKE_KEY = graphql(`
  mutation RevokeUserKey($input: RevokeUserKeyInput!) {
    revokeUserKey(input: $input) {
      ...UserKeyRow
    }
  }
`);

/**
 * End-user keys (docs/reference.md §19): a key for one end user's own tools (Claude Code, Codex, an editor),
 * shown once with a Copy button; the keys with their last use and limit; Revoke.
 */
export function UserKeys({ paywall, user }: { paywall: PaywallSummary; user: string | null }) {
  const { values, setValues, set } = useForm({ user: '', name: '', limit: '', period: 'MONTH' });
  const [secret, setSecret] = useState<{ title: string; key: string } | null>(null);
  const [{ data, fetching, error }, refetch] = useQuery({
    query: USER_KEYS,
    variables: { id: paywall.id, user },
  });
  const [createState, create] = useMutation(CREATE_KEY);
  const [revokeState, revoke] = useMutation(REVOKE_KEY);
  const forUser = values.user.trim() || user || '';

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await create({
      input: {
        paywallId: paywall.id,
        externalUserId: forUser,
        name: values.name.trim() || undefined,
        limit: values.limit.trim() || undefined,
        limitPeriod: values.limit.trim() ? (values.period as UserKeyLimitPeriod) : undefined,
      },
    });
    if (r.data) {
      const k = r.data.createUserKey;
      setSecret({ title: `Key "${k.userKey.name}" for ${k.userKey.externalUserId}`, key: k.key });
      setValues((v) => ({ ...v, name: '', limit: '' }));
      refetch({ requestPolicy: 'network-only' });
    }
  };

  return (
    <Card title={user ? `Keys of ${user}` : 'End-user keys'}>
      <ErrorBanner
        message={errorMessage(error) ?? errorMessage(createState.error) ?? errorMessage(revokeState.error)}
      />
      {secret && <SecretOnce title={secret.title} secret={secret.key} onDone={() => setSecret(null)} />}
      <DataTable
        label="End-user keys"
        rows={data?.paywall.userKeys ?? []}
        rowKey={(k) => k.id}
        loading={!data && fetching}
        empty="No keys yet. A key lets one user's own tools (Claude Code, Codex, an editor) spend their balance."
        columns={[
          { head: 'User', cell: (k: UserKey) => k.externalUserId },
          { head: 'Name', cell: (k: UserKey) => k.name },
          { head: 'Key', cell: (k: UserKey) => <code>…{k.lastFour}</code> },
          {
            head: 'Limit',
            cell: (k: UserKey) =>
              k.limit ? `${k.limit.spent} of ${k.limit.amount} / ${k.limit.period.toLowerCase()}` : 'none',
          },
          timeColumn('Last used', (k: UserKey) => k.lastUsedAt),
          {
            head: 'Status',
            cell: (k: UserKey) =>
              k.revokedAt ? (
                <Badge>revoked</Badge>
              ) : (
                <Button
                  variant="danger"
                  busy={revokeState.fetching}
                  aria-label={`Revoke key ${k.name} of ${k.externalUserId}`}
                  onClick={async () => {
                    await revoke({ input: { paywallId: paywall.id, id: k.id } });
                    refetch({ requestPolicy: 'network-only' });
                  }}
                >
                  Revoke
                </Button>
              ),
          },
        ]}
      />
      <form onSubmit={submit} className="stack" aria-label="New end-user key">
        <FormFields
          values={{ ...values, user: values.user || user || '' }}
          set={set}
          layout={[
            [
              { name: 'user', label: 'Key for user', required: true, placeholder: 'alice' },
              { name: 'name', label: 'Key name', placeholder: 'laptop' },
            ],
            [
              { name: 'limit', label: 'Key limit (USDC)', placeholder: 'No limit', hint: 'Optional.' },
              {
                name: 'period',
                label: 'Key limit period',
                options: [
                  { value: 'DAY', label: 'Per day' },
                  { value: 'WEEK', label: 'Per week' },
                  { value: 'MONTH', label: 'Per month' },
                  { value: 'TOTAL', label: 'In total' },
                ],
              },
            ],
          ]}
        />
        <div>
          <Button type="submit" variant="primary" busy={createState.fetching} disabled={!forUser}>
            Create key
          </Button>
        </div>
      </form>
    </Card>
  );
}
