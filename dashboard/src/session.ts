import { createContext, useContext } from 'react';

export interface PaywallSummary {
  id: string;
  name: string;
  mode: 'DEFAULT' | 'SHARED';
  archivedAt: string | null;
}

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
