//! The C interface from C: `tests/c/allreduce.c`, compiled with gcc against
//! `include/mlt.h` and linked with the cdylib, runs one rank per process over loopback
//! addresses.

use std::path::{Path, PathBuf};
use std::process::Command;

use endhost::testbed::bench::{BenchSpec, host_config};
use endhost::testbed::netns::FabricSpec;
use endhost_core::config::{Collective, RateControl, TransportConfig};

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Builds the cdylib (test builds make only the rlib) and returns its directory.
fn cdylib_dir() -> PathBuf {
    // target/<profile>/deps/<test> → target/<profile>
    let profile = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "--quiet", "--lib", "-p", "endhost"]);
    if profile.ends_with("release") {
        cargo.arg("--release");
    }
    let built = cargo.current_dir(manifest()).status().expect("cargo runs");
    assert!(built.success(), "cargo build of the cdylib failed");
    assert!(
        profile.join("libendhost.so").exists(),
        "no libendhost.so in {}",
        profile.display()
    );
    profile
}

/// Rank `rank` of a ring of `world` on loopback: the bench fabric's configuration with
/// rank r on 127.0.0.(`first` + r), data on `port`, control on the next.
fn loopback_config(rank: usize, world: usize, port: u16, first: u8) -> TransportConfig {
    let spec = BenchSpec {
        fabric: FabricSpec {
            hosts: world,
            rate_mbit: 10_000,
            host_buffer_ms: 0,
            switch_buffer_ms: 0,
            loss_percent: 0.0,
        },
        size_bytes: 0,
        iterations: 0,
        collective: Collective::Ring,
        loss_bound: 0.0,
        rate_control: RateControl {
            t_low_us: 500.0,
            t_high_us: 5_000.0,
            ..RateControl::default()
        },
        phase_ms: 10_000,
        gloo: false,
    };
    let mut config = host_config(&spec, rank);
    let loopback = |r: u32| std::net::Ipv4Addr::new(127, 0, 0, first + r as u8);
    config.job.ports.data = port;
    config.job.ports.control = port + 1;
    config.local.ip = loopback(rank as u32);
    config.local.path_addresses = vec![config.local.ip];
    for peer in &mut config.peers {
        peer.ip = loopback(peer.rank);
        peer.paths = vec![peer.ip];
    }
    config
}

#[test]
fn a_c_program_runs_an_allreduce_through_mlt_h() {
    let deps = cdylib_dir();
    let scratch = mlt_common::files::scratch_dir("endhost-capi-").unwrap();
    let dir = scratch.path();
    let program = dir.join("allreduce");
    let compiled = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Werror", "-O1", "-I"])
        .arg(manifest().join("include"))
        .arg(manifest().join("tests/c/allreduce.c"))
        .arg("-L")
        .arg(&deps)
        .arg(format!("-Wl,-rpath,{}", deps.display()))
        .args(["-lendhost", "-o"])
        .arg(&program)
        .output()
        .expect("gcc runs (Debian package build-essential)");
    assert!(
        compiled.status.success(),
        "{}",
        String::from_utf8_lossy(&compiled.stderr)
    );

    let world = 3;
    let children: Vec<_> = (0..world)
        .map(|rank| {
            let config = loopback_config(rank, world, 21_300, 11);
            let path = dir.join(format!("h{rank}.json"));
            std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
            Command::new(&program)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .arg(&path)
                .args([rank.to_string(), world.to_string()])
                .spawn()
                .expect("the C program starts")
        })
        .collect::<Vec<_>>();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for (rank, out) in outputs.iter().enumerate() {
        assert!(
            out.status.success(),
            "rank {rank}: {:?}",
            outputs
                .iter()
                .map(|o| String::from_utf8_lossy(&o.stderr).to_string())
                .collect::<Vec<_>>()
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "ok 1.000 1.000"
        );
    }
}

/// A pointer that crosses threads: the C ABI says its calls may come from any thread.
#[derive(Clone, Copy)]
struct Shared(*mut endhost::capi::MltTransport);
// SAFETY: what this test checks; the C ABI serialises calls on a transport itself.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// Two ranks in this process, each driven through the C ABI by three threads at once:
/// two post allreduces, one waits for their completions. Every allreduce completes
/// exactly, into the buffer its poster gave.
#[test]
fn the_c_abi_takes_calls_from_several_threads_at_once() {
    use endhost::capi::{MltCompletion, mlt_post_allreduce, mlt_start, mlt_stop, mlt_wait_cq};
    let configs: Vec<String> = (0..2)
        .map(|rank| serde_json::to_string(&loopback_config(rank, 2, 21_320, 21)).unwrap())
        .collect();
    const PER_THREAD: u32 = 20;
    const LEN: usize = 1_000;
    let ranks: Vec<_> = configs
        .into_iter()
        .enumerate()
        .map(|(rank, config)| {
            std::thread::spawn(move || {
                let config = std::ffi::CString::new(config).unwrap();
                // SAFETY: a NUL-terminated configuration.
                let t = Shared(unsafe { mlt_start(config.as_ptr(), 20_000) });
                assert!(!t.0.is_null(), "rank {rank} did not start");
                let posters: Vec<_> = (0..2u32)
                    .map(|thread| {
                        std::thread::spawn(move || {
                            let t = t;
                            let mut buffers = Vec::new();
                            for i in 0..PER_THREAD {
                                let mut data = vec![rank as f32 + 1.0; LEN];
                                // SAFETY: the buffer lives in `buffers` until the end.
                                let handle = unsafe {
                                    mlt_post_allreduce(
                                        t.0,
                                        thread * 1000 + i,
                                        data.as_mut_ptr(),
                                        LEN,
                                        0,
                                        0.0,
                                    )
                                };
                                assert!(handle > 0);
                                buffers.push(data);
                            }
                            buffers
                        })
                    })
                    .collect();
                let waiter = std::thread::spawn(move || {
                    let t = t;
                    let mut done = 0;
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                    while done < 2 * PER_THREAD && std::time::Instant::now() < deadline {
                        // SAFETY: plain data, filled by the call.
                        let mut out: MltCompletion = unsafe { std::mem::zeroed() };
                        // SAFETY: a live transport and a writable completion.
                        match unsafe { mlt_wait_cq(t.0, &mut out, 50) } {
                            1 => {
                                assert_eq!(out.status, 0, "an allreduce failed");
                                done += 1;
                            }
                            0 => {}
                            n => panic!("mlt_wait_cq returned {n}"),
                        }
                    }
                    done
                });
                let buffers: Vec<Vec<f32>> = posters
                    .into_iter()
                    .flat_map(|p| p.join().unwrap())
                    .collect();
                let done = waiter.join().unwrap();
                // SAFETY: no other call on it is under way.
                unsafe { mlt_stop(t.0) };
                assert_eq!(done, 2 * PER_THREAD, "rank {rank}");
                assert!(
                    buffers.iter().flatten().all(|&v| v == 3.0),
                    "rank {rank}: a result is not the sum"
                );
            })
        })
        .collect();
    for rank in ranks {
        rank.join().unwrap();
    }
}
