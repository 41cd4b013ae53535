//! Runs killed with SIGKILL as a crash, an OOM kill or a lost terminal kills them: whatever
//! they started dies with them (their guard takes back their servers, the servers' own
//! children, cgroups, namespaces and the scratch directory), and when the guard was killed
//! too, the next run takes back what is left and says so. `map` and `tune` at several moments: while a server starts,
//! while one is measured, and later in the run (the map's later cells, with their confirmation
//! runs). The test command runs one moment of each; `scripts/test-kill` runs every moment
//! `SWEETSPOT_KILL_ROUNDS` times.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::runs::{self, guard_of, wait_nothing_left, wait_token};
use common::{processes, timing_lock, TempDir};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_sweetspot");

/// When a run is killed.
#[derive(Debug, Clone, Copy)]
enum Moment {
    /// As soon as its first server process exists, before it is ready.
    ServerStart,
    /// A second after its first server process appeared: inside a measurement.
    Measuring,
    /// Once its stderr has said `lines` progress lines, half a second later: later points,
    /// confirmation runs among them.
    Later { lines: usize },
}

/// How many times each moment is run: 1 in the test command, more from `scripts/test-kill`.
fn rounds() -> usize {
    std::env::var("SWEETSPOT_KILL_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
}

/// Whether the script asked for every moment (else the test command's one).
fn every_moment() -> bool {
    std::env::var("SWEETSPOT_KILL_ROUNDS").is_ok()
}

/// The live `sweetspot serve` processes started by run process `pid` (its children).
fn servers_of(pid: u32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|p| p.ppid == pid as i32 && p.state != "Z")
        .filter(|p| {
            std::fs::read(format!("/proc/{}/cmdline", p.pid))
                .is_ok_and(|c| c.windows(5).any(|w| w == b"serve"))
        })
        .map(|p| p.pid)
        .collect()
}

/// Starts `sweetspot ARGS` as a terminal would, in a process group of its own, its stderr in
/// `log`.
fn start(args: &[&str], log: &std::path::Path) -> Child {
    use std::os::unix::process::CommandExt;
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Waits for `moment` in run `child` (its stderr in `log`); the servers it had then.
fn wait_for(moment: Moment, child: &mut Child, log: &std::path::Path) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let pid = child.id();
    let mut first_server = None;
    loop {
        assert!(Instant::now() < deadline, "{moment:?} never came");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {moment:?}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        let servers = servers_of(pid);
        if !servers.is_empty() && first_server.is_none() {
            first_server = Some(Instant::now());
        }
        let reached = match moment {
            Moment::ServerStart => !servers.is_empty(),
            Moment::Measuring => {
                first_server.is_some_and(|t| t.elapsed() >= Duration::from_secs(1))
            }
            Moment::Later { lines } => {
                std::fs::read_to_string(log)
                    .unwrap_or_default()
                    .lines()
                    .count()
                    >= lines
            }
        };
        if reached {
            if let Moment::Later { .. } = moment {
                std::thread::sleep(Duration::from_millis(500));
                return servers_of(pid);
            }
            return servers;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Kills run `child`'s whole process group with SIGKILL (and its guard first, with
/// `guard_too`); returns its token.
fn kill_run(child: &mut Child, guard_too: bool) -> String {
    let token = wait_token(child.id(), Duration::from_secs(5));
    if guard_too {
        let guard = guard_of(&token).expect("the run has a guard");
        kill(Pid::from_raw(guard), Signal::SIGKILL).unwrap();
    }
    killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    token
}

/// The scratch directory run `child` of `command` made (the lab's, for the peers' files and
/// `{tmp}`): there while it runs.
fn scratch_of(command: &str, child: &Child) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sweetspot-{command}-{}", child.id()));
    assert!(dir.is_dir(), "{} while the run measures", dir.display());
    dir
}

/// Whether `dir` is gone within `bound`.
fn gone_within(dir: &std::path::Path, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    while dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    !dir.exists()
}

fn alive(pid: i32) -> bool {
    processes().iter().any(|p| p.pid == pid && p.state != "Z")
}

/// A tiny sweep: the next run, which takes back what dead runs left.
fn next_run(tmp: &TempDir) -> String {
    let file = tmp.path().join("next.toml");
    std::fs::write(
        &file,
        "name = \"next\"\narchs = [\"epoll\"]\nconcurrency = [1]\nduration = \"100ms\"\n\
         warmup = \"0s\"\n[[workload]]\nname = \"hello\"\nroute = \"/hello\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["sweep", file.to_str().unwrap(), "--plain", "--out"])
        .arg(tmp.path().join("next-out"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// `map map-quick` killed at each moment: its servers die at once (they ask for it), and its
/// guard removes its cgroups; nothing of it is left.
#[test]
fn a_killed_map_leaves_nothing() {
    let _timing = timing_lock();
    let tmp = TempDir::new("kill-map");
    let moments: &[Moment] = if every_moment() {
        &[
            Moment::ServerStart,
            Moment::Measuring,
            Moment::Later { lines: 3 },
        ]
    } else {
        &[Moment::Measuring]
    };
    for round in 0..rounds() {
        for &moment in moments {
            let log = tmp.path().join(format!("map-{round}.log"));
            let out = tmp
                .path()
                .join(format!("map-{round}-{moment:?}").replace(' ', ""));
            let mut child = start(
                &[
                    "map",
                    "map-quick",
                    "--plain",
                    "--out",
                    out.to_str().unwrap(),
                ],
                &log,
            );
            let servers = wait_for(moment, &mut child, &log);
            let scratch = scratch_of("map", &child);
            let token = kill_run(&mut child, false);
            let left = wait_nothing_left(&token, Duration::from_secs(5));
            assert!(left.is_empty(), "{moment:?}, round {round}: {left:?} left");
            assert!(
                gone_within(&scratch, Duration::from_secs(5)),
                "{moment:?}: the guard left {}",
                scratch.display()
            );
            assert!(
                servers.iter().all(|&s| !alive(s)),
                "{moment:?}: a server of {servers:?} is alive"
            );
            eprintln!(
                "map killed {moment:?} (round {round}): {} server(s) gone, nothing left",
                servers.len()
            );
        }
    }
}

/// `tune` on a command whose server starts a child of its own in a new session (out of its
/// process group, as a daemon would), killed at each moment: the server dies with tune, the
/// daemon with its cgroup by the guard's hand; killed with its guard, the daemon and the cgroup
/// are left until the next run, which takes them back and says so.
#[test]
fn a_killed_tune_leaves_nothing_and_with_its_guard_what_the_next_run_takes_back() {
    let _timing = timing_lock();
    let tmp = TempDir::new("kill-tune");
    let moments: &[Moment] = if every_moment() {
        &[
            Moment::ServerStart,
            Moment::Measuring,
            Moment::Later { lines: 2 },
        ]
    } else {
        &[Moment::Measuring]
    };
    for (round, guard_too) in (0..rounds()).flat_map(|r| [(r, false), (r, true)]) {
        for &moment in moments {
            let daemon_pid = tmp
                .path()
                .join(format!("daemon-{round}-{guard_too}-{moment:?}").replace(' ', ""));
            let command = format!(
                "setsid sh -c 'echo $$ > {}; exec sleep 300' & exec {BIN} serve --arch \
                 prethreaded --workers {{workers}} --port {{port}}",
                daemon_pid.display()
            );
            let log = tmp.path().join(format!("tune-{round}.log"));
            let out = tmp
                .path()
                .join(format!("tune-{round}-{guard_too}-{moment:?}").replace(' ', ""));
            let mut child = start(
                &[
                    "tune",
                    "--cmd",
                    &command,
                    "--url",
                    "http://127.0.0.1:{port}/hello",
                    "--concurrency",
                    "4",
                    "--workers",
                    "1..8",
                    "--duration",
                    "400ms",
                    "--warmup",
                    "100ms",
                    "--out",
                    out.to_str().unwrap(),
                ],
                &log,
            );
            let servers = wait_for(moment, &mut child, &log);
            // The daemon has written its pid by the time its server is measured.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !daemon_pid.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let token = kill_run(&mut child, guard_too);
            let daemon: Option<i32> = std::fs::read_to_string(&daemon_pid)
                .ok()
                .and_then(|p| p.trim().parse().ok());
            if !guard_too {
                let left = wait_nothing_left(&token, Duration::from_secs(5));
                assert!(left.is_empty(), "{moment:?}, round {round}: {left:?} left");
                assert!(daemon.is_none_or(|d| !alive(d)), "the daemon is alive");
                assert!(
                    servers.iter().all(|&s| !alive(s)),
                    "{moment:?}: a server is alive"
                );
                eprintln!("tune killed {moment:?} (round {round}): its guard took everything back");
                continue;
            }
            std::thread::sleep(Duration::from_millis(300));
            assert!(
                servers.iter().all(|&s| !alive(s)),
                "{moment:?}: a server is alive"
            );
            if let Some(daemon) = daemon {
                assert!(alive(daemon), "the daemon went without a guard");
                assert!(
                    !runs::cgroups(&token).is_empty(),
                    "its cgroup went without a guard"
                );
            }
            let said = next_run(&tmp);
            assert!(
                daemon.is_none() || said.contains("removed what a dead run left"),
                "{said}"
            );
            let left = runs::left_of(&token);
            assert!(left.is_empty(), "{moment:?}, round {round}: {left:?} left");
            if let Some(daemon) = daemon {
                assert!(!alive(daemon), "the daemon {daemon} is alive");
            }
            eprintln!(
                "tune killed {moment:?} with its guard (round {round}): daemon {}, then taken back by the next run",
                if daemon.is_some() { "left" } else { "not started yet" }
            );
        }
    }
}
