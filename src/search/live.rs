//! The live side of every search: a point answered from the store when it finished before,
//! else measured by the lab ([`crate::lab::measure`]) and stored before the search sees it.
//! A point that cannot be stored stops the run (the stop flag), as an interrupt does.

use std::sync::atomic::Ordering;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::store::Store;
use crate::lab::{measure, LabOptions, Machine, Pinning, PointPlan, PointResult};

/// Where points are measured: the lab's options and the machine.
pub struct Live<'a> {
    pub options: &'a LabOptions,
    pub machine: &'a Machine,
}

/// Where a point's record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Measured now.
    Measured,
    /// Read back from the store (a resumed run).
    Saved,
}

impl Live<'_> {
    /// Whether the run was asked to stop.
    pub fn stopped(&self) -> bool {
        self.options.stop.load(Ordering::SeqCst)
    }

    /// The record stored under `key`, or `plan()` measured now, made a record by `keep`, and
    /// stored. `None`: interrupted, or the record could not be stored (said on stderr by
    /// `who`, and the run stopped).
    pub fn point<T: Serialize + DeserializeOwned + Clone>(
        &self,
        who: &str,
        store: &mut Store<T>,
        key: &str,
        plan: impl FnOnce() -> PointPlan,
        keep: impl FnOnce(PointResult) -> T,
    ) -> Option<(T, Origin)> {
        if let Some(done) = store.get(key) {
            return Some((done.clone(), Origin::Saved));
        }
        if self.stopped() {
            return None;
        }
        let result = measure(&plan(), Pinning::None, self.machine, self.options)?;
        let record = keep(result);
        if let Err(e) = store.put(key, record.clone()) {
            eprintln!("{who}: cannot save a point: {e:#}");
            self.options.stop.store(true, Ordering::SeqCst);
            return None;
        }
        Some((record, Origin::Measured))
    }
}
