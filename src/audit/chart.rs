//! report.html's charts: horizontal bar charts as inline SVG (plotters' SVG backend).
//!
//! Each bar has an [`Outcome`] whose colour means the same thing in every chart, and each
//! chart names what it counts; a chart with nothing to draw is a sentence, not an empty axis.

use std::collections::BTreeMap;

use plotters::prelude::*;
use serde::Serialize;

use super::decision::is_repair;
use super::report::{group, FileStats, ReportError};
use super::Summary;

/// Bars per chart: the rest are summed into one "other" bar, so charts stay readable.
const MAX_BARS: usize = 12;
/// The SVG's width in pixels: report.html's grid columns are at least this wide, so the
/// page shows the SVG unscaled and its text at [`FONT_SIZE`]'s size.
const WIDTH: u32 = 500;
/// Axis labels and bar values: plotters writes `font-size` as this over 1.24, so 18 gives
/// about 14.5 px as rendered.
const FONT_SIZE: u32 = 18;

/// What a bar counts: one colour per kind, the same in every chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Converted,
    Merged,
    Dropped,
    Quarantined,
    /// A plain count (decisions, phases, items): no outcome.
    Count,
}

impl Outcome {
    fn rgb(self) -> RGBColor {
        match self {
            Outcome::Converted => RGBColor(0x3b, 0x6e, 0xa5),
            Outcome::Merged => RGBColor(0x2a, 0x8f, 0x7f),
            Outcome::Dropped => RGBColor(0xd4, 0x89, 0x2a),
            Outcome::Quarantined => RGBColor(0xc0, 0x39, 0x2b),
            Outcome::Count => RGBColor(0x6b, 0x76, 0x85),
        }
    }

    fn legend(self) -> &'static str {
        match self {
            Outcome::Converted => "converted",
            Outcome::Merged => "merged into a conversation",
            Outcome::Dropped => "dropped by a rule",
            Outcome::Quarantined => "quarantined",
            Outcome::Count => "count",
        }
    }
}

struct Bar {
    label: String,
    value: u64,
    outcome: Outcome,
}

/// One chart as report.html shows it.
#[derive(Debug, Serialize)]
pub(crate) struct Chart {
    title: &'static str,
    /// The SVG; `None` when there is nothing to draw, and `empty` says so.
    svg: Option<String>,
    empty: &'static str,
    /// The colours the chart uses and what each means.
    legend: Vec<LegendEntry>,
}

#[derive(Debug, Serialize)]
struct LegendEntry {
    color: String,
    means: &'static str,
}

/// Every chart of report.html, built from the run's summary and per-file counts.
pub(crate) fn charts(summary: &Summary, files: &[FileStats]) -> Result<Vec<Chart>, ReportError> {
    let bar = |label: String, value: u64, outcome| Bar {
        label,
        value,
        outcome,
    };
    let mut records = vec![
        bar(
            "converted".into(),
            summary.totals.converted,
            Outcome::Converted,
        ),
        bar(
            "joined (batch results)".into(),
            summary.totals.joined,
            Outcome::Converted,
        ),
        bar(
            "merged into a conversation".into(),
            summary.reading.records_merged,
            Outcome::Merged,
        ),
    ];
    for (rule, n) in &summary.reading.records_dropped {
        records.push(bar(format!("dropped by {rule}"), *n, Outcome::Dropped));
    }
    for (class, n) in &summary.breakdown.quarantine_reasons {
        records.push(bar(
            format!("quarantined: {class}"),
            *n,
            Outcome::Quarantined,
        ));
    }
    let repairs: BTreeMap<String, u64> = summary
        .decisions
        .iter()
        .filter(|(action, _)| is_repair(action))
        .map(|(action, rules)| (action.clone(), rules.values().sum()))
        .collect();
    let worst: Vec<Bar> = files
        .iter()
        .map(|f| bar(f.file.clone(), f.quarantined, Outcome::Quarantined))
        .collect();
    let counts = |map: &BTreeMap<String, u64>| -> Vec<Bar> {
        map.iter()
            .map(|(k, v)| bar(k.clone(), *v, Outcome::Count))
            .collect()
    };
    let charts = [
        ("Records by outcome", records, "No record was read."),
        (
            "Decisions by rule",
            counts(&summary.breakdown.rules_fired),
            "No rule decided anything.",
        ),
        (
            "Assistant messages by phase",
            counts(&summary.breakdown.phases),
            "No assistant message was written.",
        ),
        (
            "Repairs by kind",
            counts(&repairs),
            "No record was repaired.",
        ),
        (
            "Items written by type",
            counts(&summary.breakdown.items),
            "No item was written.",
        ),
        (
            "Files with the most quarantined records",
            worst,
            "No record was quarantined.",
        ),
    ];
    charts
        .into_iter()
        .map(|(title, bars, empty)| {
            let bars = top(bars);
            let mut kinds: Vec<Outcome> = bars.iter().map(|b| b.outcome).collect();
            kinds.sort();
            kinds.dedup();
            // A plain count needs no key: the title says what it counts.
            let legend = kinds
                .into_iter()
                .filter(|k| *k != Outcome::Count)
                .map(|k| LegendEntry {
                    color: hex(k.rgb()),
                    means: k.legend(),
                })
                .collect();
            let svg = (!bars.is_empty()).then(|| bar_chart(&bars)).transpose()?;
            Ok(Chart {
                title,
                svg,
                empty,
                legend,
            })
        })
        .collect()
}

fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// The largest bars first, the rest summed as "others" (of the last kept bar's outcome when
/// all the rest share it, else a plain count).
fn top(mut bars: Vec<Bar>) -> Vec<Bar> {
    bars.retain(|b| b.value > 0);
    bars.sort_by(|a, b| b.value.cmp(&a.value).then(a.label.cmp(&b.label)));
    if bars.len() > MAX_BARS {
        let rest = bars.split_off(MAX_BARS - 1);
        let outcome = match rest.first().map(|b| b.outcome) {
            Some(o) if rest.iter().all(|b| b.outcome == o) => o,
            _ => Outcome::Count,
        };
        bars.push(Bar {
            label: format!("{} others", rest.len()),
            value: rest.iter().map(|b| b.value).sum(),
            outcome,
        });
    }
    bars
}

/// A horizontal bar chart as an SVG document, each bar in its outcome's colour.
fn bar_chart(bars: &[Bar]) -> Result<String, ReportError> {
    let chart_error = |e: &dyn std::fmt::Display| ReportError::Chart(e.to_string());
    let mut svg = String::new();
    let n = bars.len();
    let height = 44 + 28 * n as u32;
    let label_chars = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(4);
    let label_width = (label_chars as u32 * 8 + 16).min(WIDTH / 2);
    let max = bars.iter().map(|b| b.value).max().unwrap_or(0).max(1);
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| chart_error(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .margin(6)
            .x_label_area_size(FONT_SIZE + 12)
            .y_label_area_size(label_width)
            .build_cartesian_2d(0u64..max + max / 5 + 1, (0..n).into_segmented())
            .map_err(|e| chart_error(&e))?;
        // Segment 0 is at the bottom: the first (largest) bar goes to the top.
        let at = |i: usize| n - 1 - i;
        let label = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) if *i < n => bars
                .get(at(*i))
                .map(|b| b.label.clone())
                .unwrap_or_default(),
            SegmentValue::CenterOf(_) | SegmentValue::Exact(_) => String::new(),
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&label)
            .x_labels(5)
            .x_label_formatter(&|v: &u64| group(*v))
            .label_style(("sans-serif", FONT_SIZE))
            .draw()
            .map_err(|e| chart_error(&e))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let mut rect = Rectangle::new(
                    [
                        (0, SegmentValue::Exact(at(i))),
                        (b.value, SegmentValue::Exact(at(i) + 1)),
                    ],
                    b.outcome.rgb().filled(),
                );
                rect.set_margin(3, 3, 0, 0);
                rect
            }))
            .map_err(|e| chart_error(&e))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                Text::new(
                    group(b.value),
                    (b.value, SegmentValue::CenterOf(at(i))),
                    ("sans-serif", FONT_SIZE).into_font(),
                )
            }))
            .map_err(|e| chart_error(&e))?;
        root.present().map_err(|e| chart_error(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_an_svg_with_a_bar_per_value_in_its_outcome_colour() {
        let bars = [
            Bar {
                label: "converted".into(),
                value: 90,
                outcome: Outcome::Converted,
            },
            Bar {
                label: "quarantined: x".into(),
                value: 10,
                outcome: Outcome::Quarantined,
            },
        ];
        let svg = bar_chart(&bars).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("converted") && svg.contains("quarantined"));
        for o in [Outcome::Converted, Outcome::Quarantined] {
            assert!(svg.contains(&hex(o.rgb()).to_uppercase()) || svg.contains(&hex(o.rgb())));
        }
    }
}
