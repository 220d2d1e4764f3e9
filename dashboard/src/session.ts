import { createContext, useContext } from 'react';
import { graphql } from './gql';
import type { PaywallSummaryFragment } from './gql/graphql';

/** What every page knows of the paywall it shows (the list, the switcher, the page's header). */
graphql(`
  fragment PaywallSummary on Paywall {
    id
    name
    mode
    archivedAt
    apiKeyLastFour
    createdAt
  }
`);
export type PaywallSummary = PaywallSummaryFragment;

export interface Session {
  token: string;
  /** `owner`: all the owner's paywalls; `apiKey`: that paywall alone. */
  kind: 'owner' | 'apiKey';
  signOut(): void;
}

export const SessionContext = createContext<Session | null>(null);
export const useSession = (): Session => {
  const s = useContext(SessionContext);
  if (!s) throw new Error('no session');
  return s;
};
