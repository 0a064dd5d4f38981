//! Best-so-far curves as one SVG: a panel per workload, GFLOP/s against trials, with the
//! random baseline and the vendor library as horizontal lines. Written by hand: a few
//! polylines need no plotting crate and no fonts.

use std::fmt::Write as _;

pub struct Panel {
    pub title: String,
    /// (trials, best GFLOP/s) after each round.
    pub curve: Vec<(usize, f64)>,
    /// Named horizontal references (random baseline, OpenBLAS).
    pub refs: Vec<(String, f64)>,
}

const W: f64 = 360.0;
const H: f64 = 220.0;
const M: f64 = 40.0;
const COLS: usize = 3;

pub fn svg(panels: &[Panel]) -> String {
    svg_with(panels, "trials", "GFLOP/s")
}

/// The same with other axis names (x, y).
pub fn svg_with(panels: &[Panel], x_name: &str, y_name: &str) -> String {
    let rows = panels.len().div_ceil(COLS).max(1);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">"#,
        W * COLS as f64,
        H * rows as f64
    );
    let colors = ["#d62728", "#7f7f7f", "#1f77b4", "#2ca02c"];
    for (k, p) in panels.iter().enumerate() {
        let (ox, oy) = ((k % COLS) as f64 * W, (k / COLS) as f64 * H);
        let xmax = p.curve.last().map_or(1, |c| c.0).max(1) as f64;
        let ymax = p
            .curve
            .iter()
            .map(|c| c.1)
            .chain(p.refs.iter().map(|r| r.1))
            .fold(1.0, f64::max)
            * 1.1;
        let px = |x: f64| ox + M + x / xmax * (W - 1.5 * M);
        let py = |y: f64| oy + H - M + -y / ymax * (H - 1.7 * M);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" font-weight="bold">{}</text>"#,
            ox + M,
            oy + 16.0,
            xml(&p.title)
        );
        // Axes with end labels.
        let _ = writeln!(
            s,
            r#"<path d="M{} {} L{} {} L{} {}" stroke="black" fill="none"/>"#,
            px(0.0),
            py(ymax),
            px(0.0),
            py(0.0),
            px(xmax),
            py(0.0)
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            px(0.0) - 3.0,
            py(ymax) + 4.0,
            if ymax < 10.0 {
                format!("{ymax:.3}")
            } else {
                format!("{ymax:.0}")
            }
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">0</text>"#,
            px(0.0) - 3.0,
            py(0.0) + 4.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{} {}</text>"#,
            px(xmax),
            py(0.0) + 14.0,
            xmax,
            xml(x_name)
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            ox + 4.0,
            oy + 30.0,
            xml(y_name)
        );
        for (i, (name, y)) in p.refs.iter().enumerate() {
            let c = colors[(i + 1) % colors.len()];
            let _ = writeln!(
                s,
                r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{c}" stroke-dasharray="4 3"/><text x="{}" y="{}" fill="{c}">{} {:.3}</text>"#,
                px(0.0),
                py(*y),
                px(xmax),
                py(*y),
                px(0.0) + 4.0,
                py(*y) - 3.0,
                xml(name),
                y
            );
        }
        let mut d = String::new();
        for (i, &(x, y)) in p.curve.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1} {:.1} ",
                if i == 0 { "M" } else { "L" },
                px(x as f64),
                py(y)
            );
        }
        let _ = writeln!(
            s,
            r#"<path d="{d}" stroke="{}" stroke-width="2" fill="none"/>"#,
            colors[0]
        );
    }
    s.push_str("</svg>\n");
    s
}

fn xml(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
