//! The C interface from C: `tests/c/allreduce.c`, compiled with gcc against
//! `include/mlt.h` and linked with the cdylib, runs one rank per process over loopback
//! addresses.

use std::path::{Path, PathBuf};
use std::process::Command;

use endhost::testbed::bench::{BenchSpec, host_config};
use endhost::testbed::netns::FabricSpec;
use endhost_core::config::{Collective, RateControl};

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
    let children: Vec<_> = (0..world)
        .map(|rank| {
            // The bench fabric's addressing, moved onto loopback.
            let mut config = host_config(&spec, rank);
            let loopback = |r: u32| std::net::Ipv4Addr::new(127, 0, 0, 11 + r as u8);
            config.job.ports.data = 21_300;
            config.job.ports.control = 21_301;
            config.local.ip = loopback(rank as u32);
            config.local.path_addresses = vec![config.local.ip];
            for peer in &mut config.peers {
                peer.ip = loopback(peer.rank);
                peer.paths = vec![peer.ip];
            }
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
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok 1.000");
    }
}
