//! The search kernel `map`, `advise` and `tune` share: what a measured point is to a search
//! ([`sample`]: samples, levels, misses), the one-knob search ([`knob`]: doubling, golden
//! section in log space, noise gating), the ranking and its rule ([`rank`]), a server's
//! profile at one connection ([`profile`]), the [`Measure`] trait the searches take their
//! numbers through (live, each command's adapter over [`crate::lab::Lab::point`]). Written here,
//! not taken from a crate: the search over live servers is the product.

pub mod flags;
pub mod knob;
pub mod profile;
pub mod rank;
pub mod sample;

pub use rank::Level;
pub use sample::{level_of, sample_of, Miss, Sample};

/// Where a search's numbers come from: a live server (or, on resume, the disk; in tests, a
/// synthetic curve), for one point `P` of the search's own kind (a map's candidate and run
/// length, a tune's knob values). `None`: interrupted.
pub trait Measure<P: ?Sized> {
    fn measure(&mut self, point: &P) -> Option<Sample>;

    /// Why the next point is asked for, in a few words (for a progress line): what the
    /// search needs it to decide.
    fn why(&mut self, _reason: &'static str) {}
}

/// What a search cost against the grid it replaces: "N points measured in T, where the full
/// grid needs G (x% of it)" (for `map`, `advise` and `tune`).
pub fn points_sentence(measured: usize, wall_s: f64, grid: usize) -> String {
    format!(
        "{measured} points measured in {}, where the full grid needs {grid} ({} of it)",
        crate::render::numbers::wall_time(wall_s),
        crate::render::numbers::percent(measured as f64 / grid.max(1) as f64)
    )
}
