//! Rendering the lab's charts ([`Chart`]) as SVG and PNG with plotters. Text uses the DejaVu
//! Sans font embedded by the `dejavu` crate, registered once with plotters' ab_glyph backend,
//! so no system font or fontconfig is needed on the user's host.
//!
//! A logarithmic y axis is drawn as log10 of the values on a linear axis, labelled with the
//! values themselves: one code path for both kinds of axis and both backends.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Context as _};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::Chart;

const SIZE: (u32, u32) = (800, 500);

/// The colours of the lines, in series order (repeats after eight).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Registers the embedded font once; the error (a corrupt font) is kept for every caller.
fn font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
                .map_err(|_| "the embedded DejaVu Sans font could not be loaded".to_owned())
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

/// Writes `dir/<file_stem>.svg` and `.png`; returns their paths. plotters writes to a path
/// as given (through a symbolic link planted at the name), so each chart is drawn in a fresh
/// private folder and copied to `dir` with `private_dir::write_file` (a new file renamed over
/// the name, never written through a link).
pub fn render(chart: &Chart, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    font()?;
    let scratch = cotenant_ops::private_dir::fresh_temp("cotenant-plot")?;
    // The scratch folder goes however this ends.
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _remove = Remove(scratch.clone());
    let mut written = Vec::new();
    // One panel per chart, side by side: the chart and those drawn beside it.
    let panels: Vec<&Chart> = std::iter::once(chart).chain(&chart.beside).collect();
    let size = (SIZE.0 * panels.len() as u32, SIZE.1);
    for extension in ["svg", "png"] {
        let name = format!("{}.{extension}", chart.file_stem);
        let (drawn, path) = (scratch.join(&name), dir.join(&name));
        let result = if extension == "svg" {
            draw_panels(SVGBackend::new(&drawn, size).into_drawing_area(), &panels).map_err(|e| e.to_string())
        } else {
            draw_panels(BitMapBackend::new(&drawn, size).into_drawing_area(), &panels)
                .map_err(|e| e.to_string())
        };
        result.map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
        let bytes =
            std::fs::read(&drawn).with_context(|| format!("reading the drawn {}", drawn.display()))?;
        cotenant_ops::private_dir::write_file(&path, &bytes, 0o644)?;
        written.push(path);
    }
    Ok(written)
}

/// The points of each series as drawn: finite, and positive (then log10) on a log axis.
fn drawable(chart: &Chart) -> Vec<Vec<(f64, f64)>> {
    chart
        .series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!chart.log_y || *y > 0.0))
                .map(|&(x, y)| (x, if chart.log_y { y.log10() } else { y }))
                .collect()
        })
        .collect()
}

/// `lo..hi` widened so that it is never empty.
fn padded(lo: f64, hi: f64) -> (f64, f64) {
    if hi > lo {
        (lo, hi)
    } else {
        (lo - 1.0, hi + 1.0)
    }
}

/// The axis ranges for `points`: x from the data; y from 0 (linear) or the smallest value
/// (log), to a little above the largest.
fn ranges(points: &[Vec<(f64, f64)>], log_y: bool) -> ((f64, f64), (f64, f64)) {
    let all = || points.iter().flatten();
    let (x_lo, x_hi) =
        all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let (y_lo, y_hi) =
        all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    if !x_lo.is_finite() {
        return ((0.0, 1.0), (0.0, 1.0));
    }
    let y = if log_y {
        // A fifth of a decade of room on each side.
        padded(y_lo - 0.2, y_hi + 0.2)
    } else {
        padded(y_lo.min(0.0), y_hi * 1.1)
    };
    (padded(x_lo, x_hi), y)
}

/// Draws `panels` side by side on `root`, left to right.
fn draw_panels<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    panels: &[&Chart],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    for (area, chart) in root.split_evenly((1, panels.len())).into_iter().zip(panels) {
        draw(area, chart)?;
    }
    root.present()
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let points = drawable(chart);
    let empty = points.iter().all(Vec::is_empty);
    let ((x0, x1), (y0, y1)) = ranges(&points, chart.log_y);
    let title = if empty { format!("{} (no data)", chart.title) } else { chart.title.clone() };
    let mut ctx = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let log_y = chart.log_y;
    let y_format = move |v: &f64| {
        let value = if log_y { 10f64.powf(*v) } else { *v };
        if value.abs() >= 100.0 {
            format!("{value:.0}")
        } else if value.abs() >= 1.0 {
            format!("{value:.1}")
        } else {
            format!("{value:.2}")
        }
    };
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(if log_y { format!("{} (log scale)", chart.y_label) } else { chart.y_label.clone() })
        .y_label_formatter(&y_format)
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, (series, line)) in chart.series.iter().zip(&points).enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        ctx.draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(2)))?
            .label(series.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        ctx.draw_series(line.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    if !chart.series.is_empty() {
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE)
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Series;

    #[test]
    fn charts_render_as_svg_and_png_with_and_without_data() {
        let dir = cotenant_ops::private_dir::fresh_temp("cotenant-plot-test").unwrap();
        let series = vec![
            Series { name: "adaptive".into(), points: vec![(1.0, 6.0), (2.0, 7.5), (3.0, 8.0)] },
            Series { name: "ignorant".into(), points: vec![(1.0, 6.0), (2.0, 17.0), (3.0, f64::NAN)] },
        ];
        for (stem, log_y, series) in [
            ("log", true, series.clone()),
            ("linear", false, series),
            (
                "empty",
                true,
                vec![Series { name: "nothing".into(), points: vec![(1.0, 0.0), (f64::NAN, 2.0)] }],
            ),
        ] {
            let chart = Chart {
                file_stem: stem.into(),
                title: format!("test {stem}"),
                x_label: "P".into(),
                y_label: "ms".into(),
                log_y,
                beside: Vec::new(),
                series,
            };
            let paths = render(&chart, &dir).unwrap();
            let svg = std::fs::read_to_string(&paths[0]).unwrap();
            assert!(svg.contains("<svg") && svg.contains(&format!("test {stem}")), "{stem}");
            for s in &chart.series {
                assert!(svg.contains(&s.name), "{stem}: legend {} missing", s.name);
            }
            assert!(std::fs::read(&paths[1]).unwrap().starts_with(b"\x89PNG"), "{stem}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_chart_with_charts_beside_it_is_one_picture_of_side_by_side_panels() {
        let dir = cotenant_ops::private_dir::fresh_temp("cotenant-plot-test").unwrap();
        let panel = |title: &str, name: &str| Chart {
            file_stem: "two".into(),
            title: title.into(),
            x_label: "load (%)".into(),
            y_label: "ms".into(),
            log_y: true,
            beside: Vec::new(),
            series: vec![Series { name: name.into(), points: vec![(50.0, 5.0), (100.0, 9.0)] }],
        };
        let mut chart = panel("left panel", "first");
        chart.beside.push(panel("right panel", "second"));
        let paths = render(&chart, &dir).unwrap();
        let svg = std::fs::read_to_string(&paths[0]).unwrap();
        for text in ["left panel", "right panel", "first", "second"] {
            assert!(svg.contains(text), "{text} missing");
        }
        // The PNG's width (IHDR, bytes 16..20) is two panels'.
        let png = std::fs::read(&paths[1]).unwrap();
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 2 * SIZE.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ranges_are_never_empty() {
        assert_eq!(ranges(&[vec![(2.0, 5.0)]], false), ((1.0, 3.0), (0.0, 5.5)));
        assert_eq!(ranges(&[vec![]], true), ((0.0, 1.0), (0.0, 1.0)));
    }
}
