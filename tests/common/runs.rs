//! What sweetspot runs make outside themselves, seen from outside: a run's token (its
//! directory under `sweetspot::reclaim::runs_root()` names its pid), its guard, and what is
//! left of a run that is over: live processes carrying its marker, cgroups, namespaces, TUN
//! devices.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use sweetspot::reclaim::{run_alive, runs_root, token_of, MARKER, PID_FILE, TOKEN_LEN};

/// The token of the run of sweetspot process `pid`, while it runs.
pub fn token_of_pid(pid: u32) -> Option<String> {
    std::fs::read_dir(runs_root())
        .ok()?
        .flatten()
        .find(|e| {
            std::fs::read_to_string(e.path().join(PID_FILE))
                .is_ok_and(|p| p.trim() == pid.to_string())
        })
        .map(|e| e.file_name().to_string_lossy().to_string())
}

/// Waits up to `bound` for process `pid` to have a run, and returns its token.
pub fn wait_token(pid: u32, bound: Duration) -> String {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(token) = token_of_pid(pid) {
            return token;
        }
        assert!(Instant::now() < deadline, "process {pid} made no run");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid of the guard of run `token`.
pub fn guard_of(token: &str) -> Option<i32> {
    let dir = runs_root().join(token);
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        (args.len() >= 3
            && args[1] == b"__reclaim"
            && args[2] == dir.as_os_str().as_encoded_bytes())
        .then_some(pid)
    })
}

/// Live processes whose environment carries run `token`'s marker.
pub fn marked(token: &str) -> Vec<i32> {
    let needle = format!("{MARKER}={token}\0");
    super::processes()
        .into_iter()
        .filter(|p| p.state != "Z")
        .filter(|p| {
            std::fs::read(format!("/proc/{}/environ", p.pid))
                .is_ok_and(|e| e.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .map(|p| p.pid)
        .collect()
}

/// The cgroups of run `token` (in any v1 hierarchy or in v2's, at the top or one level down).
pub fn cgroups(token: &str) -> Vec<PathBuf> {
    let prefix = format!("sweetspot-{token}-");
    let mut found = Vec::new();
    let mut dirs = vec![PathBuf::from("/sys/fs/cgroup")];
    for _ in 0..3 {
        let mut next = Vec::new();
        for dir in dirs {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = entry.file_name().to_string_lossy().to_string();
                if name.starts_with(&prefix) {
                    found.push(entry.path());
                } else if !name.starts_with("sweetspot-") {
                    next.push(entry.path());
                }
            }
        }
        dirs = next;
    }
    found
}

/// The network namespaces of run `token`.
pub fn namespaces(token: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(&format!("sweetspot-{token}-")))
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the network devices here.
pub fn links() -> Vec<String> {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// The TUN devices of run `token` here (the clients' are in their namespace).
pub fn devices(token: &str) -> Vec<String> {
    links()
        .into_iter()
        .filter(|n| n.starts_with(&format!("ss{token}")))
        .collect()
}

/// What runs that are over left: namespaces, and devices named for a run, whose run is not
/// alive.
pub fn left_by_dead_runs() -> Vec<String> {
    let root = runs_root();
    let mut left: Vec<String> = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| token_of(n).is_some_and(|t| !run_alive(&root, t)))
        .collect();
    left.extend(links().into_iter().filter(|n| {
        n.len() > 2 + TOKEN_LEN
            && n.starts_with("ss")
            && n.is_char_boundary(2 + TOKEN_LEN)
            && !run_alive(&root, &n[2..2 + TOKEN_LEN])
    }));
    left
}

/// Everything of run `token` still here: processes with its marker, cgroups, namespaces,
/// devices.
pub fn left_of(token: &str) -> Vec<String> {
    let mut left: Vec<String> = marked(token)
        .iter()
        .map(|p| format!("process {p}"))
        .collect();
    left.extend(cgroups(token).iter().map(|c| c.display().to_string()));
    left.extend(namespaces(token));
    left.extend(devices(token));
    left
}

/// Waits up to `bound` for nothing of run `token` to be left; what is left then.
pub fn wait_nothing_left(token: &str, bound: Duration) -> Vec<String> {
    let deadline = Instant::now() + bound;
    loop {
        let left = left_of(token);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
