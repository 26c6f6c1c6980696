//! Medians and spreads of samples, the rows they make and the markdown
//! table that shows them.

use std::future::Future;
use std::time::{Duration, Instant};

/// What a figure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Seconds of wall clock.
    Seconds,
    /// Bytes.
    Bytes,
    /// A number of things (processes).
    Count,
}

/// Median and p10/p90 of a sample, in `unit`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub(crate) median: f64,
    pub(crate) p10: f64,
    pub(crate) p90: f64,
    pub(crate) n: usize,
    pub(crate) unit: Unit,
}

pub(crate) fn stat(xs: Vec<Duration>) -> Stat {
    stat_of(
        xs.into_iter().map(|d| d.as_secs_f64()).collect(),
        Unit::Seconds,
    )
}

pub(crate) fn stat_of(mut xs: Vec<f64>, unit: Unit) -> Stat {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    Stat {
        median: at(0.5),
        p10: at(0.1),
        p90: at(0.9),
        n: xs.len(),
        unit,
    }
}

pub(crate) fn show(s: &Stat) -> String {
    let unit = |x: f64| match s.unit {
        Unit::Seconds if x >= 1.0 => format!("{x:.2} s"),
        Unit::Seconds if x >= 1e-3 => format!("{:.2} ms", x * 1e3),
        Unit::Seconds => format!("{:.2} µs", x * 1e6),
        Unit::Bytes => format!("{:.2} MiB", x / f64::from(1u32 << 20)),
        Unit::Count => format!("{x:.0}"),
    };
    format!(
        "{} ({}–{}, n={})",
        unit(s.median),
        unit(s.p10),
        unit(s.p90),
        s.n
    )
}

pub(crate) struct Row {
    pub(crate) figure: String,
    pub(crate) ours: Stat,
    pub(crate) baseline: Option<(String, Stat)>,
}

pub(crate) async fn time<F, Fut, T>(reps: usize, mut f: F) -> Result<Stat, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let mut xs = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f().await?;
        xs.push(start.elapsed());
    }
    Ok(stat(xs))
}

/// As [`time`], with `setup` run (untimed) before each repetition.
pub(crate) async fn time_after<S, SFut, F, Fut, T>(
    reps: usize,
    mut setup: S,
    mut f: F,
) -> Result<Stat, String>
where
    S: FnMut() -> SFut,
    SFut: Future<Output = Result<(), String>>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let mut xs = Vec::with_capacity(reps);
    for _ in 0..reps {
        setup().await?;
        let start = Instant::now();
        f().await?;
        xs.push(start.elapsed());
    }
    Ok(stat(xs))
}

pub(crate) fn table(rows: &[Row]) -> String {
    let mut s = String::from("| figure | ours (median, p10–p90) | baseline | baseline (median, p10–p90) | ratio |\n|---|---|---|---|---|\n");
    for r in rows {
        match &r.baseline {
            Some((name, b)) => s.push_str(&format!(
                "| {} | {} | {} | {} | {:.2}× |\n",
                r.figure,
                show(&r.ours),
                name,
                show(b),
                r.ours.median / b.median
            )),
            None => s.push_str(&format!(
                "| {} | {} | — | — | — |\n",
                r.figure,
                show(&r.ours)
            )),
        }
    }
    s
}
