//! One run of the lab, opened the same way by every command that measures (`sweep`, `map`,
//! `advise`, `tune`, `limiters`): the stop flag set by SIGINT/SIGTERM, this binary as the
//! server of our architectures, the run's guard ([`crate::reclaim`]: it takes back what a
//! killed run left, its cgroups, namespaces, servers and this scratch directory), the scratch
//! directory (removed when the [`Lab`] is dropped, however the command ends) and what the
//! machine is. Its two doors are [`Lab::measure`] (one point,
//! measured now) and [`Lab::point`] (one point answered from the run's point log when it
//! finished before, else measured and logged before the caller sees it).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::points::PointLog;
use super::{measure, LabOptions, Machine, Pinning, PointPlan, PointResult};

/// The lab, opened for one run.
pub struct Lab {
    /// What measuring needs: the server binary, the stop flag, the scratch directory.
    pub options: LabOptions,
    /// What the machine is (its cores, its notes; `sweep` adds its pinning).
    pub machine: Machine,
    /// The guard's record of the scratch directory (gone with the lab, after the directory).
    _scratch_record: Option<crate::reclaim::Entry>,
}

/// Where a point's record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Measured now.
    Measured,
    /// Read back from the point log (a resumed run).
    Saved,
}

impl Lab {
    /// The lab for `command` (which names its scratch directory): signals stop it, the run's
    /// guard is started and told of the scratch directory, the machine is read.
    pub fn open(command: &str) -> anyhow::Result<Lab> {
        let stop = crate::os::stop_on_signals()?;
        let options = LabOptions::here(command, stop)?;
        let scratch = options.scratch_dir.to_string_lossy().to_string();
        let record = crate::reclaim::current()
            .map(|run| run.record(crate::reclaim::Kind::Scratch, &scratch));
        Ok(Lab {
            options,
            machine: Machine::detect(),
            _scratch_record: record,
        })
    }

    /// The stop flag, for what runs beside the lab (a load run, a gate).
    pub fn stop_flag(&self) -> &Arc<AtomicBool> {
        &self.options.stop
    }

    /// Whether the run was asked to stop.
    pub fn stopped(&self) -> bool {
        self.options.stop.load(Ordering::SeqCst)
    }

    /// Asks the run to stop (a point that could not be logged).
    pub fn stop(&self) {
        self.options.stop.store(true, Ordering::SeqCst);
    }

    /// The machine's CPUs, at least one.
    pub fn cores(&self) -> u32 {
        self.machine.cores.max(1)
    }

    /// The scratch directory, removed when the lab is dropped.
    pub fn scratch_dir(&self) -> &Path {
        &self.options.scratch_dir
    }

    /// Writes the peers' sources into the scratch directory when one of `commands` names
    /// `{peers}`.
    pub fn write_peers_for<'a>(
        &self,
        mut commands: impl Iterator<Item = &'a str>,
    ) -> anyhow::Result<()> {
        if commands.any(|c| c.contains("{peers}")) {
            super::peers::write_files(&self.options.scratch_dir)?;
        }
        Ok(())
    }

    /// One point measured now on a fresh server; `None` when interrupted.
    pub fn measure(&self, plan: &PointPlan, pinning: Pinning) -> Option<PointResult> {
        measure(plan, pinning, &self.machine, &self.options)
    }

    /// The record logged under `key`, or `plan()` measured now, made a record by `keep`, and
    /// logged. `None`: interrupted, or the record could not be logged (said on stderr by
    /// `who`, and the run stopped).
    pub fn point<T: Serialize + DeserializeOwned + Clone>(
        &self,
        who: &str,
        log: &mut PointLog<T>,
        key: &str,
        plan: impl FnOnce() -> PointPlan,
        keep: impl FnOnce(PointResult) -> T,
    ) -> Option<(T, Origin)> {
        if let Some(done) = log.get(key) {
            return Some((done.clone(), Origin::Saved));
        }
        if self.stopped() {
            return None;
        }
        let record = keep(self.measure(&plan(), Pinning::None)?);
        if let Err(e) = log.put(key, record.clone()) {
            eprintln!("{who}: cannot save a point: {e:#}");
            self.stop();
            return None;
        }
        Some((record, Origin::Measured))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.options.scratch_dir);
    }
}
