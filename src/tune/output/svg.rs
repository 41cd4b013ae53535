//! `tune.svg`: the heat map of the measured configurations.

use crate::render::numbers::{duration_us, thousands};
use crate::render::svg::{heat_map, HeatCell};
use crate::search::Miss;
use crate::tune::TuneResults;
use std::collections::BTreeSet;

/// The heat map of the measured configurations (two knobs: the first as rows, the second as
/// columns; one knob: a row): each labelled with its req/s and p99, the pick in one colour,
/// those within 5% of it in another, p99 misses hatched.
pub fn heat_map_svg(r: &TuneResults) -> anyhow::Result<String> {
    let two = r.knobs.len() == 2;
    let axis = |i: usize| -> Vec<u32> {
        r.measured
            .iter()
            .map(|c| c.values[i])
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect()
    };
    let cols = axis(r.knobs.len() - 1);
    let rows = if two { axis(0) } else { vec![0] };
    let pick = r
        .pick
        .as_ref()
        .filter(|p| p.level.rps.0 > 0.0)
        .map(|p| (p.pick.clone(), p.level.rps.0));
    let mut cells = Vec::new();
    for c in &r.measured {
        let column = cols.iter().position(|v| *v == c.values[r.knobs.len() - 1]);
        let row = if two {
            rows.iter().position(|v| *v == c.values[0])
        } else {
            Some(0)
        };
        let (Some(column), Some(row)) = (column, row) else {
            continue;
        };
        let missed = c.level.rps.0 <= 0.0;
        let color = match &pick {
            Some((p, _)) if *p == c.values => Some(0),
            Some((_, best)) if !missed && c.level.rps.0 >= best * 0.95 => Some(2),
            _ => None,
        };
        cells.push(HeatCell {
            column,
            row,
            color,
            hatched: missed,
            lines: vec![
                if missed {
                    match c.miss(r.p99_bound_ms * 1000.0) {
                        Some(Miss::Unanswered) => "unanswered".into(),
                        Some(Miss::Errors) => "errors".into(),
                        Some(Miss::Lab(kind)) => format!("lab: {}", kind.name()),
                        _ => "misses p99".into(),
                    }
                } else {
                    format!("{} req/s", thousands(c.level.rps.0))
                },
                format!("p99 {}", duration_us(c.level.p99_us)),
            ],
        });
    }
    let title = format!(
        "tune: req/s and p99 of each configuration measured, {} connections",
        r.concurrency
    );
    let (y_title, row_names) = if two {
        (
            r.knobs[0].name.clone(),
            rows.iter().map(u32::to_string).collect(),
        )
    } else {
        (String::new(), vec![String::new()])
    };
    heat_map(
        &title,
        &r.knobs[r.knobs.len() - 1].name,
        &cols.iter().map(u32::to_string).collect::<Vec<_>>(),
        &y_title,
        &row_names,
        &cells,
        &[
            ("the pick".to_string(), 0),
            ("within 5% of it".to_string(), 2),
        ],
    )
}
