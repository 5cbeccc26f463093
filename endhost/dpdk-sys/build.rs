//! Finds the system DPDK with pkg-config, links its shared libraries (the EAL loads the
//! poll-mode drivers itself from its plugin directory) and compiles the C shim that
//! turns DPDK's static-inline fast-path functions into symbols Rust can call; compiles
//! the XDP program of the af_xdp path with clang (BPF target, with BTF for its map).

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=csrc/xdp_redirect.bpf.c");
    xdp_program();
    let dpdk = pkg_config::Config::new()
        .atleast_version("22.11")
        .probe("libdpdk")
        .unwrap_or_else(|e| {
            panic!(
                "the dpdk feature needs DPDK 22.11 or newer found by pkg-config \
                 (Debian: apt-get install libdpdk-dev; scripts/setup does it): {e}"
            )
        });
    let mut shim = cc::Build::new();
    shim.file("csrc/shim.c").opt_level(2).warnings(true);
    for path in &dpdk.include_paths {
        shim.include(path);
    }
    // DPDK's own flags: `-include rte_config.h` and the -march its inline functions
    // were written for (they use SSE4.2).
    let cflags = std::process::Command::new("pkg-config")
        .args(["--cflags-only-other", "libdpdk"])
        .output()
        .expect("pkg-config runs");
    let cflags = String::from_utf8(cflags.stdout).expect("pkg-config prints UTF-8");
    let mut words = cflags.split_whitespace();
    while let Some(word) = words.next() {
        if word == "-include" {
            if let Some(header) = words.next() {
                shim.flag("-include").flag(header);
            }
        } else {
            shim.flag(word);
        }
    }
    shim.compile("endhost_dpdk_shim");
}

/// `csrc/xdp_redirect.bpf.c` → `$OUT_DIR/xdp_redirect.bpf.o`, with Debian's clang and
/// the headers of libbpf-dev and linux-libc-dev.
fn xdp_program() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets the target arch");
    let status = std::process::Command::new("clang")
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        // <asm/types.h>, which <linux/bpf.h> includes, is under the multiarch directory.
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .args(["-c", "csrc/xdp_redirect.bpf.c", "-o"])
        .arg(out.join("xdp_redirect.bpf.o"))
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "the dpdk feature compiles its XDP program with clang (Debian: apt-get \
                 install clang libbpf-dev; scripts/setup does it): {e}"
            )
        });
    assert!(
        status.success(),
        "clang could not compile csrc/xdp_redirect.bpf.c (are libbpf-dev's headers installed?)"
    );
}
