import { useEffect, useState, type ReactNode } from 'react';

/** A tiny history router: paths under /dashboard are client-side routes (the server falls back to the app). */
export const BASE = '/dashboard';
const EVENT = 'dashboard:navigate';

export function navigate(path: string, replace = false): void {
  const url = `${BASE}${path}`;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  window.dispatchEvent(new Event(EVENT));
  window.scrollTo(0, 0);
}

export function usePath(): string {
  const read = () => location.pathname.replace(/^\/dashboard/, '').replace(/\/+$/, '') || '/';
  const [path, setPath] = useState(read);
  useEffect(() => {
    const on = () => setPath(read());
    window.addEventListener('popstate', on);
    window.addEventListener(EVENT, on);
    return () => {
      window.removeEventListener('popstate', on);
      window.removeEventListener(EVENT, on);
    };
  }, []);
  return path;
}

export function Link(props: { to: string; children: ReactNode; current?: boolean; className?: string }) {
  return (
    <a
      href={`${BASE}${props.to}`}
      className={props.className}
      aria-current={props.current ? 'page' : undefined}
      onClick={(e) => {
        if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        navigate(props.to);
      }}
    >
      {props.children}
    </a>
  );
}

/** Navigates once mounted (never during render). */
export function Redirect({ to }: { to: string }) {
  useEffect(() => navigate(to, true), [to]);
  return null;
}
