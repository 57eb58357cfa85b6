//! report.html's charts as a reviewer reads them: text large enough to read, one colour per
//! outcome (quarantines stand out), titles that say what they count, and a sentence instead
//! of an empty chart.

use std::collections::BTreeSet;

use crate::common::{run_folder, Workdir};

const GOOD: &str = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"}]}\n";
const BAD: &str = "{\"not messages\": \"no conversation here\"}\n";

/// Converts `lines` as `in.jsonl` and returns report.html's figures: (title, body).
fn figures(name: &str, lines: &str, code: i32) -> Vec<(String, String)> {
    let wd = Workdir::new(name);
    wd.create("in.jsonl", lines);
    let home = wd.convert("in.jsonl", "home", &[], code);
    let html = std::fs::read_to_string(run_folder(&home.root).join("report.html")).unwrap();
    html.split("<figure>")
        .skip(1)
        .map(|f| {
            let f = f.split("</figure>").next().unwrap();
            let title = f
                .split("<figcaption>")
                .nth(1)
                .and_then(|t| t.split("</figcaption>").next())
                .unwrap()
                .to_string();
            (title, f.to_string())
        })
        .collect()
}

fn figure<'a>(figures: &'a [(String, String)], title: &str) -> &'a str {
    let titles: Vec<&String> = figures.iter().map(|f| &f.0).collect();
    &figures
        .iter()
        .find(|f| f.0 == title)
        .unwrap_or_else(|| panic!("no chart {title:?} in {titles:?}"))
        .1
}

/// The `fill` colours of a chart's bars (plotters draws each bar as a filled `<rect>`).
fn bar_fills(svg: &str) -> BTreeSet<String> {
    svg.split("<rect")
        .skip(1)
        .filter_map(|r| r.split("fill=\"").nth(1)?.split('"').next())
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c != "#ffffff" && c != "none")
        .collect()
}

/// Every `font-size` the SVGs set, in pixels.
fn font_sizes(html: &str) -> Vec<f64> {
    html.split("font-size=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next()?.trim_end_matches("px").parse().ok())
        .collect()
}

#[test]
fn report_html_charts_read_at_a_glance_and_quarantines_stand_out() {
    let figures = figures("polish_charts_quarantine", &format!("{GOOD}{GOOD}{BAD}"), 1);
    let titles: Vec<&str> = figures.iter().map(|f| f.0.as_str()).collect();
    assert!(titles.contains(&"Records by outcome"), "{titles:?}");
    assert!(
        !titles.iter().any(|t| t.contains("Conversations by")),
        "{titles:?}"
    );

    let sizes = font_sizes(&figures.iter().map(|f| f.1.as_str()).collect::<String>());
    assert!(!sizes.is_empty());
    assert!(sizes.iter().all(|s| *s >= 12.0), "font sizes {sizes:?}");

    let outcome = figure(&figures, "Records by outcome");
    assert!(outcome.contains(">converted<"), "{outcome}");
    assert!(outcome.contains("quarantined: "), "{outcome}");
    let fills = bar_fills(outcome);
    assert_eq!(fills.len(), 2, "converted and quarantined bars: {fills:?}");
    // The legend names each colour it uses.
    for means in ["converted", "quarantined"] {
        assert!(
            outcome.contains(&format!("</i>{means}</span>")),
            "{outcome}"
        );
    }

    // A chart of plain counts has no key: its title says what it counts.
    let decisions = figure(&figures, "Items written by type");
    assert!(!decisions.contains("class=\"legend\""), "{decisions}");

    // The worst-files chart draws quarantines in the quarantine colour of the outcome chart.
    let worst = figure(&figures, "Files with the most quarantined records");
    let worst_fills = bar_fills(worst);
    assert_eq!(worst_fills.len(), 1, "{worst}");
    assert!(fills.is_superset(&worst_fills), "{fills:?} {worst_fills:?}");
    assert!(worst.contains("in.jsonl"), "{worst}");
    assert!(!worst.contains("(none)"), "{worst}");
}

#[test]
fn with_no_quarantine_the_worst_files_chart_says_so_instead_of_an_empty_axis() {
    let figures = figures("polish_charts_clean", &format!("{GOOD}{GOOD}"), 0);
    let worst = figure(&figures, "Files with the most quarantined records");
    assert!(!worst.contains("<svg"), "{worst}");
    assert!(worst.contains("No record was quarantined."), "{worst}");
    for (title, body) in &figures {
        assert!(!body.contains("(none)"), "{title}: {body}");
    }
    let outcome = figure(&figures, "Records by outcome");
    assert_eq!(bar_fills(outcome).len(), 1, "{outcome}");
    assert!(!outcome.contains("quarantined"), "{outcome}");
}
