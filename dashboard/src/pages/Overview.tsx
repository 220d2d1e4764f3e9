import { useState } from 'react';
import { useQuery } from 'urql';
import {
  Bar,
  BarChart,
  CartesianGrid,
  ComposedChart,
  Legend,
  Line,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from 'recharts';
import { errorMessage } from '../api';
import { graphql } from '../gql';
import type { UsageBucketRowFragment } from '../gql/graphql';
import { integer, moneyAxis, shortDay, toNumber, usdcHeadline, utcDay } from '../format';
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

const RANGES = [
  [7, '7 days'],
  [30, '30 days'],
  [90, '90 days'],
  [365, '1 year'],
] as const;

const money = (v: number) =>
  `${v.toLocaleString(undefined, { minimumFractionDigits: 6, maximumFractionDigits: 6 })} USDC`;

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
const axisCount = (v: number) =>
  v >= 1e6 ? `${(v / 1e6).toFixed(1)}M` : v >= 1000 ? `${(v / 1000).toFixed(1)}k` : `${v}`;

// What both charts share: margins, grid, axis looks, legend, rounded bar tops, no animation.
const CHART_MARGIN = { top: 8, right: 8, left: 0, bottom: 0 };
const TICK = { fontSize: 11, fill: '#7a8394' };
const X_AXIS = { tick: TICK, tickLine: false, axisLine: { stroke: '#e3e6eb' } };
const Y_AXIS = { tick: TICK, tickLine: false, axisLine: false };
const GRID_STROKE = '#eef0f3';
const LEGEND_STYLE = { fontSize: 12 };
const ROUNDED_BAR = { radius: [3, 3, 0, 0] as [number, number, number, number], isAnimationActive: false };

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
  const axis = moneyAxis(series.flatMap((d) => [d.Revenue, d['Provider cost'], d.Margin]));
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
                <ResponsiveContainer width="100%" height="100%">
                  <ComposedChart data={series} margin={CHART_MARGIN}>
                    <CartesianGrid stroke={GRID_STROKE} vertical={false} />
                    <XAxis dataKey="day" {...X_AXIS} minTickGap={16} />
                    <YAxis
                      ticks={axis.ticks}
                      domain={[axis.ticks[0], axis.ticks[axis.ticks.length - 1]]}
                      interval={0}
                      tickFormatter={axis.format}
                      {...Y_AXIS}
                      width={64}
                    />
                    <Tooltip formatter={(v) => money(Number(v))} />
                    <Legend wrapperStyle={LEGEND_STYLE} />
                    <Bar dataKey="Revenue" fill="#2f5bd3" {...ROUNDED_BAR} maxBarSize={28} />
                    <Bar dataKey="Provider cost" fill="#f79009" {...ROUNDED_BAR} maxBarSize={28} />
                    <Line
                      dataKey="Margin"
                      stroke="#12b76a"
                      strokeWidth={2}
                      dot={false}
                      type="monotone"
                      isAnimationActive={false}
                    />
                  </ComposedChart>
                </ResponsiveContainer>
              </div>
            )}
          </Card>
          <div className="grid-2 stack-below-wide">
            <Card title="Requests and tokens per model">
              {models.length === 0 ? (
                <Empty>No usage yet.</Empty>
              ) : (
                <>
                  <div className="chart-sm" role="img" aria-label="Requests and tokens per model">
                    <ResponsiveContainer width="100%" height="100%">
                      <BarChart data={models} margin={CHART_MARGIN}>
                        <CartesianGrid stroke={GRID_STROKE} vertical={false} />
                        <XAxis dataKey="model" {...X_AXIS} />
                        <YAxis yAxisId="t" tickFormatter={axisCount} {...Y_AXIS} width={48} />
                        <YAxis
                          yAxisId="r"
                          orientation="right"
                          tickFormatter={axisCount}
                          {...Y_AXIS}
                          width={40}
                        />
                        <Tooltip formatter={(v) => integer(Number(v))} />
                        <Legend wrapperStyle={LEGEND_STYLE} />
                        <Bar
                          yAxisId="t"
                          dataKey="Prompt tokens"
                          stackId="tok"
                          fill="#7a9cf0"
                          isAnimationActive={false}
                        />
                        <Bar
                          yAxisId="t"
                          dataKey="Completion tokens"
                          stackId="tok"
                          fill="#2f5bd3"
                          {...ROUNDED_BAR}
                        />
                        <Bar yAxisId="r" dataKey="Requests" fill="#12b76a" {...ROUNDED_BAR} />
                      </BarChart>
                    </ResponsiveContainer>
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
