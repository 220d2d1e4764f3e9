import { useMemo, useState, type FormEvent } from 'react';
import { Provider, useQuery } from 'urql';
import { createApiClient, getToken, probe, setToken } from './api';
import { Link, navigate, Redirect, usePath } from './router';
import { graphql } from './gql';
import { SessionContext, useSession, type Session } from './session';
import { Button, ErrorBanner, Field, Loading, useDocumentTitle } from './ui';
import { PaywallsPage } from './pages/Paywalls';
import { OverviewPage } from './pages/Overview';
import { UsersPage } from './pages/Users';
import { LivePage } from './pages/Live';
import { WebhooksPage } from './pages/Webhooks';
import { SettingsPage } from './pages/Settings';
import { ModelsPage } from './pages/Models';
import { EarningsPage } from './pages/Earnings';

export function App() {
  const [session, setSession] = useState<{ token: string; kind: Session['kind'] } | null>(() => {
    const token = getToken();
    const kind = sessionStorage.getItem('paywall-proxy.kind');
    return token && (kind === 'owner' || kind === 'apiKey') ? { token, kind } : null;
  });
  const api = useMemo(() => (session ? createApiClient(session.token) : null), [session]);
  if (!session || !api)
    return (
      <SignIn
        onSignedIn={(token, kind) => {
          setToken(token);
          sessionStorage.setItem('paywall-proxy.kind', kind);
          setSession({ token, kind });
        }}
      />
    );
  const value: Session = {
    ...session,
    signOut: () => {
      api.ws.dispose();
      setToken(null);
      sessionStorage.removeItem('paywall-proxy.kind');
      setSession(null);
      navigate('/', true);
    },
  };
  return (
    <SessionContext.Provider value={value}>
      <Provider value={api.client}>
        <Shell />
      </Provider>
    </SessionContext.Provider>
  );
}

const SIGN_IN_PAYWALLS = graphql(`
  query SignInPaywalls {
    paywalls {
      id
    }
  }
`);
const SIGN_IN_OWN_PAYWALL = graphql(`
  query SignInOwnPaywall {
    paywall {
      id
    }
  }
`);

/** docs/reference.md §12: one field labelled "Token" (owner token or a paywall API key) and a button "Sign in". */
function SignIn(props: { onSignedIn: (token: string, kind: Session['kind']) => void }) {
  const [token, setTokenValue] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useDocumentTitle('Sign in');
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const t = token.trim();
    if (!t) return setError('Enter an owner token or a paywall API key.');
    setBusy(true);
    setError(null);
    const list = await probe(t, SIGN_IN_PAYWALLS);
    if (list.error) {
      setBusy(false);
      return setError(list.status === 401 ? 'That token is not valid (or the key was rotated).' : list.error);
    }
    // An API key answers `paywall` without an id; an owner token must name one.
    const own = await probe(t, SIGN_IN_OWN_PAYWALL);
    setBusy(false);
    props.onSignedIn(t, own.data?.paywall?.id ? 'apiKey' : 'owner');
  };
  return (
    <main className="signin">
      <div className="card">
        <div className="brand" style={{ color: 'var(--ink)', padding: 0, marginBottom: 18 }}>
          <span className="brand-mark" /> Paywall Proxy
        </div>
        <h1>Sign in to the dashboard</h1>
        <p className="muted">
          Use your owner token to manage every paywall, or a paywall API key for that paywall alone. The token
          stays in this browser tab only.
        </p>
        <form onSubmit={submit}>
          <ErrorBanner message={error} />
          <Field label="Token" type="password" value={token} onChange={setTokenValue} autoFocus required />
          <Button type="submit" variant="primary" busy={busy}>
            Sign in
          </Button>
        </form>
      </div>
    </main>
  );
}

/** The first 100 paywalls (the most one page of `paywalls` holds); a later one opened by link is read alone. */
const PAYWALLS = graphql(`
  query DashboardPaywalls {
    paywalls(includeArchived: true, first: 100) {
      ...PaywallSummary
    }
  }
`);
const ONE_PAYWALL = graphql(`
  query DashboardPaywall($id: ID) {
    paywall(id: $id) {
      ...PaywallSummary
    }
  }
`);

const SECTIONS = [
  ['overview', 'Overview'],
  ['users', 'Users'],
  ['live', 'Live'],
  ['webhooks', 'Webhooks'],
  ['models', 'Models & prices'],
  ['settings', 'Settings'],
  ['earnings', 'Earnings'],
] as const;

function Shell() {
  const session = useSession();
  const path = usePath();
  const [{ data, fetching, error }, refetch] = useQuery({ query: PAYWALLS });
  const paywalls = data?.paywalls ?? [];
  const m = /^\/p\/([^/]+)(?:\/([a-z]+))?/.exec(path);
  const paywallId = m?.[1] ?? null;
  const section = m?.[2] ?? 'overview';
  const listed = paywalls.find((p) => p.id === paywallId) ?? null;
  const [one] = useQuery({
    query: ONE_PAYWALL,
    variables: { id: paywallId },
    pause: !data || !paywallId || listed !== null,
  });
  const current = listed ?? one.data?.paywall ?? null;
  const only = session.kind === 'apiKey' ? paywalls[0] : null;

  if ((!data && fetching) || (paywallId && !current && one.fetching))
    return <Loading label="Loading your paywalls…" />;
  if (only && !paywallId) return <Redirect to={`/p/${only.id}/overview`} />;
  let page;
  if (!paywallId)
    page = (
      <PaywallsPage
        paywalls={paywalls}
        error={error}
        refetch={() => refetch({ requestPolicy: 'network-only' })}
      />
    );
  else if (!current)
    page = <ErrorBanner message={data ? 'This paywall is not one of yours (or it does not exist).' : null} />;
  else {
    const P =
      {
        overview: OverviewPage,
        users: UsersPage,
        live: LivePage,
        webhooks: WebhooksPage,
        models: ModelsPage,
        settings: SettingsPage,
        earnings: EarningsPage,
      }[section] ?? OverviewPage;
    page = <P paywall={current} key={`${current.id}/${section}`} />;
  }
  return (
    <div className="shell">
      <aside className="sidebar">
        <div className="brand">
          <span className="brand-mark" /> Paywall Proxy
        </div>
        {session.kind === 'owner' && (
          <nav className="nav" aria-label="Account">
            <Link to="/" current={!paywallId}>
              All paywalls
            </Link>
          </nav>
        )}
        {current && (
          <>
            <div className="field">
              <label htmlFor="paywall-switch">Paywall</label>
              {session.kind === 'owner' ? (
                <select
                  id="paywall-switch"
                  value={current.id}
                  onChange={(e) => navigate(`/p/${e.target.value}/${section}`)}
                >
                  {(listed ? paywalls : [current, ...paywalls]).map((p) => (
                    <option key={p.id} value={p.id}>
                      {p.name}
                      {p.archivedAt ? ' (archived)' : ''}
                    </option>
                  ))}
                </select>
              ) : (
                <strong id="paywall-switch" style={{ color: '#fff' }}>
                  {current.name}
                </strong>
              )}
            </div>
            <nav className="nav" aria-label="Paywall">
              {SECTIONS.filter(([s]) => s !== 'earnings' || current.mode === 'SHARED').map(([s, label]) => (
                <Link key={s} to={`/p/${current.id}/${s}`} current={section === s}>
                  {label}
                </Link>
              ))}
            </nav>
          </>
        )}
        <div className="sidebar-foot">
          <span>
            {session.kind === 'owner' ? 'Signed in with an owner token' : 'Signed in with a paywall API key'}
          </span>
          <Button variant="secondary" className="btn-sm" onClick={session.signOut}>
            Sign out
          </Button>
        </div>
      </aside>
      <main className="main">{page}</main>
    </div>
  );
}
