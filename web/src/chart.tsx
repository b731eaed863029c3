import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export type Series = { label: string; values: (number | null)[]; color: string };

/**
 * A line chart (uPlot) over UTC days or timestamps; sized to its container and redrawn when
 * the container's width changes. A text table of the same figures sits beside every chart
 * (see its callers) for screen readers.
 */
export function LineChart({
  title,
  x,
  series,
  height = 220,
  yLabel,
  yMax,
}: {
  title: string;
  x: number[];
  series: Series[];
  height?: number;
  yLabel?: string;
  /** A fixed top of the y axis (100 for scores); from the data otherwise. */
  yMax?: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          points: { show: x.length < 40 },
        })),
      ],
      axes: [{}, { label: yLabel, size: 60 }],
      scales: {
        // One point (a single day or scan) spans the day around it: uPlot widens a single
        // time value by 86400 / ms "seconds", which with second timestamps is 1000 days.
        x: {
          time: true,
          range: (_u, min, max) =>
            x.length > 0 && x.every((v) => v === x[0])
              ? [x[0]! - 43_200, x[0]! + 43_200]
              : [min, max],
        },
        y: { range: (_u, _min, max) => [0, yMax ?? Math.max(1, max * 1.1)] },
      },
      legend: { show: true },
      hooks: {
        // The x range drawn, in the page: what the axis spans, for a reader of the DOM.
        setScale: [
          (u, key) => {
            if (key !== "x") return;
            el.dataset.xMin = String(u.scales.x?.min ?? "");
            el.dataset.xMax = String(u.scales.x?.max ?? "");
          },
        ],
      },
    };
    const plot = new uPlot(opts, [x, ...series.map((s) => s.values)] as uPlot.AlignedData, el);
    const resize = new ResizeObserver(() =>
      plot.setSize({ width: Math.max(200, el.clientWidth), height }),
    );
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [x, series, height, yLabel, yMax]);
  return (
    <div ref={box} class="chart" role="img" aria-label={title} data-testid={`chart-${title}`} />
  );
}
