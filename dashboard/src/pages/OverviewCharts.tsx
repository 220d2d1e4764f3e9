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
import { integer, moneyAxis } from '../format';

/** One day of the overview's main chart (USDC as numbers, for drawing only). */
export interface DayPoint {
  day: string;
  Revenue: number;
  'Provider cost': number;
  Margin: number;
  Requests: number;
}
/** One model of the per-model chart. */
export interface ModelPoint {
  model: string;
  Requests: number;
  'Prompt tokens': number;
  'Completion tokens': number;
}

const money = (v: number) =>
  `${v.toLocaleString(undefined, { minimumFractionDigits: 6, maximumFractionDigits: 6 })} USDC`;

const axisCount = (v: number) =>
  v >= 1e6 ? `${(v / 1e6).toFixed(1)}M` : v >= 1000 ? `${(v / 1000).toFixed(1)}k` : `${v}`;

// What both charts share: margins, grid, axis looks, legend, rounded bar tops, no animation.
const CHART_MARGIN = { top: 8, right: 8, left: 0, bottom: 0 };
const TICK = { fontSize: 11, fill: '#5f6878' };
const X_AXIS = { tick: TICK, tickLine: false, axisLine: { stroke: '#e3e6eb' } };
const Y_AXIS = { tick: TICK, tickLine: false, axisLine: false };
const GRID_STROKE = '#eef0f3';
const LEGEND_STYLE = { fontSize: 12 };
/** Legend labels in the text colour (the swatch keeps the series colour): orange or green text on white is unreadable. */
const legendLabel = (value: string) => <span className="legend-label">{value}</span>;
const ROUNDED_BAR = { radius: [3, 3, 0, 0] as [number, number, number, number], isAnimationActive: false };

/** Revenue and provider cost (bars) and margin (a line) per day. */
export function DailyChart({ series }: { series: DayPoint[] }) {
  const axis = moneyAxis(series.flatMap((d) => [d.Revenue, d['Provider cost'], d.Margin]));
  return (
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
        <Legend wrapperStyle={LEGEND_STYLE} formatter={legendLabel} />
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
  );
}

/** Prompt and completion tokens (stacked) and requests per model. */
export function ModelChart({ models }: { models: ModelPoint[] }) {
  return (
    <ResponsiveContainer width="100%" height="100%">
      <BarChart data={models} margin={CHART_MARGIN}>
        <CartesianGrid stroke={GRID_STROKE} vertical={false} />
        <XAxis dataKey="model" {...X_AXIS} />
        <YAxis yAxisId="t" tickFormatter={axisCount} {...Y_AXIS} width={48} />
        <YAxis yAxisId="r" orientation="right" tickFormatter={axisCount} {...Y_AXIS} width={40} />
        <Tooltip formatter={(v) => integer(Number(v))} />
        <Legend wrapperStyle={LEGEND_STYLE} formatter={legendLabel} />
        <Bar yAxisId="t" dataKey="Prompt tokens" stackId="tok" fill="#7a9cf0" isAnimationActive={false} />
        <Bar yAxisId="t" dataKey="Completion tokens" stackId="tok" fill="#2f5bd3" {...ROUNDED_BAR} />
        <Bar yAxisId="r" dataKey="Requests" fill="#12b76a" {...ROUNDED_BAR} />
      </BarChart>
    </ResponsiveContainer>
  );
}
