import { lazy, Suspense, useState } from 'react';
import { useQuery } from 'urql';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { UsageBucketRowFragment } from '../gql/graphql';
import { integer, shortDay, toNumber, usdcHeadline, utcDay } from '../format';
import type { PaywallSummary } from '../session';
import { Card, DataTable, Empty, ErrorBanner, Loading, Money, moneyColumn, PageHeader, Stat } from '../ui';

type Bucket = UsageBucketRowFragment;
graphql(`
  fragment UsageBucketRow on UsageBucket {
    key
    userId
    requests
    revenue
    providerCost
    margin
    promptTokens
    completionTokens
    cacheReadTokens
    cacheWriteTokens
    audioPromptTokens
    reasoningTokens
    audioCompletionTokens
    imagePromptTokens
    imageCompletionTokens
    images
    audioSeconds
    characters
  }
`);
const USAGE = graphql(`
  query Usage($id: ID, $from: String!, $to: String!) {
    paywall(id: $id) {
      id
      byDay: usage(from: $from, to: $to, groupBy: DAY) {
        totals {
          ...UsageBucketRow
        }
        buckets {
          ...UsageBucketRow
        }
      }
      byModel: usage(from: $from, to: $to, groupBy: MODEL, limit: 12) {
        buckets {
          ...UsageBucketRow
        }
      }
      byUser: usage(from: $from, to: $to, groupBy: USER, limit: 10) {
        buckets {
          ...UsageBucketRow
        }
      }
    }
  }
`);

// The charts (recharts, most of the bundle) are a chunk of their own, fetched when a chart is drawn:
// the sign-in page and the other pages never load it.
const DailyChart = lazy(() => import('./OverviewCharts').then((m) => ({ default: m.DailyChart })));
const ModelChart = lazy(() => import('./OverviewCharts').then((m) => ({ default: m.ModelChart })));

const RANGES = [
  [7, '7 days'],
  [30, '30 days'],
  [90, '90 days'],
  [365, '1 year'],
] as const;

/** SHARED: what the paywall earned for its owner (the earnings account), all time. */
const EARNINGS = graphql(`
  query OverviewEarnings($id: ID) {
    paywall(id: $id) {
      id
      builtinProvider
      earnings {
        available
        pending
        withdrawn
        fees
      }
    }
  }
`);
export function OverviewPage({ paywall }: { paywall: PaywallSummary }) {
  const [days, setDays] = useState<number>(30);
  const [{ data, fetching, error }] = useQuery({
    query: USAGE,
    variables: { id: paywall.id, from: utcDay(-(days - 1)), to: utcDay(0) },
  });
  const shared = paywall.mode === 'SHARED';
  const [earningsResult] = useQuery({
    query: EARNINGS,
    variables: { id: paywall.id },
    pause: !shared,
  });
  const earnings = shared ? earningsResult.data?.paywall.earnings : undefined;
  const u = data?.paywall;
  const totals = u?.byDay.totals;
  const series =
    u?.byDay.buckets.map((b) => ({
      day: shortDay(b.key),
      Revenue: toNumber(b.revenue),
      'Provider cost': toNumber(b.providerCost),
      Margin: toNumber(b.margin),
      Requests: b.requests,
    })) ?? [];
  const models =
    u?.byModel.buckets.map((b) => ({
      model: b.key || 'manual charges',
      Requests: b.requests,
      'Prompt tokens': b.promptTokens,
      'Completion tokens': b.completionTokens,
    })) ?? [];
  return (
    <div className="stack">
      <PageHeader
        title="Overview"
        subtitle={`${paywall.name} · completed charges by UTC day`}
        actions={
          <div className="segmented" role="group" aria-label="Range">
            {RANGES.map(([d, label]) => (
              <button key={d} type="button" aria-pressed={days === d} onClick={() => setDays(d)}>
                {label}
              </button>
            ))}
          </div>
        }
      />
      <ErrorBanner message={errorMessage(error)} />
      {!u && fetching && <Loading />}
      {totals && (
        <div className="grid-4" aria-label="Totals">
          <MoneyStat label="Revenue" value={totals.revenue} sub="charged to users" />
          <MoneyStat
            label="Provider cost"
            value={totals.providerCost}
            sub={
              earningsResult.data?.paywall.builtinProvider && shared
                ? 'paid to the built-in provider'
                : 'tokens at cost prices'
            }
          />
          <MoneyStat
            label="Margin"
            value={totals.margin}
            sub={shared ? 'revenue − provider cost, before fees' : 'revenue − provider cost'}
          />
          <Stat
            card
            label="Requests"
            testId="total-requests"
            sub={
              <>
                {integer(totals.promptTokens)} prompt · {integer(totals.completionTokens)} completion tokens
              </>
            }
          >
            {integer(totals.requests)}
          </Stat>
        </div>
      )}
      {shared && (
        <Card title="Earnings" actions={<span className="legend-note">all time, USDC</span>}>
          {earnings ? (
            <div className="grid-4 earnings-grid" aria-label="Earnings">
              <EarningsStat label="Available" value={earnings.available} sub="withdrawable now" />
              <EarningsStat label="Pending" value={earnings.pending} sub="withdrawals requested" />
              <EarningsStat label="Withdrawn" value={earnings.withdrawn} sub="paid out" />
              <EarningsStat label="Platform fees" value={earnings.fees} sub="taken from your charges" />
            </div>
          ) : (
            <>
              <ErrorBanner message={errorMessage(earningsResult.error)} />
              {earningsResult.fetching && <Loading />}
            </>
          )}
        </Card>
      )}
      {u && (
        <>
          <Card
            title="Revenue, provider cost and margin per day"
            actions={<span className="legend-note">USDC</span>}
          >
            {totals!.requests === 0 ? (
              <Empty>No completed charges in this range yet.</Empty>
            ) : (
              <div className="chart" role="img" aria-label="Revenue, provider cost and margin per day">
                <Suspense fallback={null}>
                  <DailyChart series={series} />
                </Suspense>
              </div>
            )}
          </Card>
          <TokensByBucket totals={totals!} models={u.byModel.buckets} />
          <UnitsByModel totals={totals!} models={u.byModel.buckets} />
          <div className="grid-2 stack-below-wide">
            <Card title="Requests and tokens per model">
              {models.length === 0 ? (
                <Empty>No usage yet.</Empty>
              ) : (
                <>
                  <div className="chart-sm" role="img" aria-label="Requests and tokens per model">
                    <Suspense fallback={null}>
                      <ModelChart models={models} />
                    </Suspense>
                  </div>
                  <BucketTable buckets={u.byModel.buckets} label="Model" manual="manual charges" />
                </>
              )}
            </Card>
            <Card title="Top users">
              <BucketTable
                buckets={u.byUser.buckets}
                label="User"
                empty="No paying users in this range yet."
              />
            </Card>
          </div>
        </>
      )}
    </div>
  );
}

/** A USDC total: rounded to cents in large type, exact below. */
function MoneyStat(props: { label: string; value: string; sub: string }) {
  return (
    <Stat
      card
      label={props.label}
      testId={`total-${props.label.toLowerCase().replace(/ /g, '-')}`}
      title={`${props.value} USDC`}
      sub={
        <>
          <Money value={props.value} /> · {props.sub}
        </>
      }
    >
      {usdcHeadline(props.value)} <span className="unit">USDC</span>
    </Stat>
  );
}

/** An all-time earnings figure: exact, 6 decimals. */
function EarningsStat(props: { label: string; value: string; sub: string }) {
  return (
    <Stat
      label={props.label}
      sub={props.sub}
      testId={`earnings-${props.label.toLowerCase().replace(/ /g, '-')}`}
    >
      <Money value={props.value} unit />
    </Stat>
  );
}

function BucketTable(props: { buckets: Bucket[]; label: string; manual?: string; empty?: string }) {
  return (
    <DataTable
      label={`${props.label}s`}
      rows={props.buckets}
      rowKey={(b) => b.userId ?? b.key}
      empty={props.empty}
      columns={[
        {
          head: props.label,
          className: props.manual ? 'mono' : undefined,
          cell: (b) => b.key || props.manual,
        },
        { head: 'Requests', num: true, cell: (b) => integer(b.requests) },
        { head: 'Tokens', num: true, cell: (b) => integer(b.promptTokens + b.completionTokens) },
        moneyColumn('Revenue', (b: Bucket) => b.revenue),
        moneyColumn('Margin', (b: Bucket) => b.margin),
      ]}
    />
  );
}

/**
 * The usage buckets (docs/reference.md §13) of prompt and completion tokens: each side's parts, every
 * token in one part. "Input" and "Output" are what no other bucket took (uncached text input, visible output).
 */
const INPUT_PARTS = [
  [
    'prompt',
    'Input',
    (b: Bucket) =>
      b.promptTokens - b.cacheReadTokens - b.cacheWriteTokens - b.audioPromptTokens - b.imagePromptTokens,
  ],
  ['cacheRead', 'Cached input', (b: Bucket) => b.cacheReadTokens],
  ['cacheWrite', 'Cache write', (b: Bucket) => b.cacheWriteTokens],
  ['audioPrompt', 'Audio input', (b: Bucket) => b.audioPromptTokens],
  ['imagePrompt', 'Image input', (b: Bucket) => b.imagePromptTokens],
] as const;
const OUTPUT_PARTS = [
  [
    'completion',
    'Output',
    (b: Bucket) => b.completionTokens - b.reasoningTokens - b.audioCompletionTokens - b.imageCompletionTokens,
  ],
  ['reasoning', 'Reasoning', (b: Bucket) => b.reasoningTokens],
  ['audioCompletion', 'Audio output', (b: Bucket) => b.audioCompletionTokens],
  ['imageCompletion', 'Image output', (b: Bucket) => b.imageCompletionTokens],
] as const;

/**
 * docs/reference.md §22: what was charged besides tokens, per model ("3 images · 94 s of audio · 1,820
 * characters"); shown only when the range has some.
 */
function UnitsByModel(props: { totals: Bucket; models: Bucket[] }) {
  const units = (b: Bucket) =>
    [
      b.images > 0 && `${integer(b.images)} ${b.images === 1 ? 'image' : 'images'}`,
      b.audioSeconds > 0 && `${integer(b.audioSeconds)} s of audio`,
      b.characters > 0 && `${integer(b.characters)} characters`,
    ]
      .filter(Boolean)
      .join(' · ');
  if (!units(props.totals)) return null;
  return (
    <Card title="Images and audio" actions={<span className="legend-note">{units(props.totals)}</span>}>
      <DataTable
        label="Units by model"
        rows={props.models.filter((m) => units(m))}
        rowKey={(b) => b.key}
        columns={[
          { head: 'Model', className: 'mono', cell: (b) => b.key },
          { head: 'Images', num: true, cell: (b: Bucket) => integer(b.images) },
          { head: 'Seconds of audio', num: true, cell: (b: Bucket) => integer(b.audioSeconds) },
          { head: 'Characters', num: true, cell: (b: Bucket) => integer(b.characters) },
        ]}
      />
    </Card>
  );
}
type Part = (typeof INPUT_PARTS)[number] | (typeof OUTPUT_PARTS)[number];

/** Tokens of the range by usage bucket: a stacked bar per side, then the same per model. */
function TokensByBucket(props: { totals: Bucket; models: Bucket[] }) {
  const { totals } = props;
  const models = props.models.filter((m) => m.promptTokens + m.completionTokens > 0);
  return (
    <Card
      title="Tokens by usage bucket"
      actions={<span className="legend-note">every token in one bucket</span>}
    >
      {totals.promptTokens + totals.completionTokens === 0 ? (
        <Empty>No tokens in this range yet.</Empty>
      ) : (
        <>
          <div className="bucket-sides">
            <BucketBar side="Prompt tokens" total={totals.promptTokens} parts={INPUT_PARTS} of={totals} />
            <BucketBar
              side="Completion tokens"
              total={totals.completionTokens}
              parts={OUTPUT_PARTS}
              of={totals}
            />
          </div>
          <DataTable
            label="Tokens by bucket"
            rows={models}
            rowKey={(b) => b.key}
            columns={[
              { head: 'Model', className: 'mono', cell: (b) => b.key },
              ...[...INPUT_PARTS, ...OUTPUT_PARTS].map(([, label, tokens]) => ({
                head: label,
                num: true,
                cell: (b: Bucket) => integer(tokens(b)),
              })),
            ]}
          />
        </>
      )}
    </Card>
  );
}

/** One side (prompt or completion): its total, a bar split by bucket, and each bucket's tokens and share. */
function BucketBar(props: { side: string; total: number; parts: readonly Part[]; of: Bucket }) {
  const parts = props.parts.map(([key, label, tokens]) => ({ key, label, n: tokens(props.of) }));
  const share = (n: number) => (props.total === 0 ? 0 : (100 * n) / props.total);
  return (
    <section className="bucket-side" aria-label={props.side}>
      <h3>
        {props.side} <span className="num">{integer(props.total)}</span>
      </h3>
      <div className="bucket-bar" aria-hidden="true">
        {parts.map(
          (p) =>
            p.n > 0 && <span key={p.key} className={`bucket-${p.key}`} style={{ width: `${share(p.n)}%` }} />,
        )}
      </div>
      <ul className="bucket-legend">
        {parts.map((p) => (
          <li key={p.key}>
            <span className={`swatch bucket-${p.key}`} aria-hidden="true" />
            <span className="label">{p.label}</span>
            <span className="num" data-testid={`bucket-${p.key}`}>
              {integer(p.n)}
            </span>
            <span className="share">{p.n > 0 ? `${share(p.n).toFixed(share(p.n) < 1 ? 1 : 0)}%` : ''}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
