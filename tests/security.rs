//! Inputs written by someone careless or hostile: names that would be code, paths that
//! leave their directory, device text that would make mltctl allocate without end,
//! sizes that wrap, secrets pasted where they do not belong, and files that are not
//! files. Each is refused with its location, and nothing is echoed that should not be.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{fixture, mltctl, mltctl_within, text};

/// A fresh directory for one test (unguessable name, 0700), removed when dropped.
struct Scratch(mlt_common::files::TempDir);

impl Scratch {
    fn new(name: &str) -> Scratch {
        Scratch(mlt_common::files::scratch_dir(&format!("mltctl-security-{name}-")).unwrap())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// The lab inventory with each `(from, to)` replaced (each must occur), written here
    /// beside its layer file.
    fn lab(&self, edits: &[(&str, &str)]) -> PathBuf {
        let mut yaml = std::fs::read_to_string(fixture("inventory/lab.yaml")).unwrap();
        for (from, to) in edits {
            assert!(yaml.contains(from), "the lab has no {from:?}");
            yaml = yaml.replace(from, to);
        }
        std::fs::copy(fixture("inventory/vgg16.layers"), self.path("vgg16.layers")).unwrap();
        let file = self.path("lab.yaml");
        std::fs::write(&file, yaml).unwrap();
        file
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `validate` on `file`: exit 3, nothing on standard output, and these problems (as
/// `line:col: message`, the file name in front) on standard error.
fn refused(file: &Path, problems: &[&str]) {
    let out = mltctl(&["validate", "-i", s(file)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(out.stdout.is_empty());
    let mut want: Vec<String> = problems
        .iter()
        .map(|p| format!("{}:{p}", file.display()))
        .collect();
    want.push(format!(
        "mltctl: the inventory has {} problem(s); nothing was changed",
        problems.len()
    ));
    assert_eq!(stderr.lines().collect::<Vec<_>>(), want);
}

// ------------------------------------------------------------------ names are data

/// Replacements made in the lab inventory: (what is there, what replaces it).
type Edits<'a> = &'a [(&'a str, &'a str)];

#[test]
fn names_that_would_be_code_are_refused_where_they_are_written() {
    let dir = Scratch::new("names");
    let cases: &[(Edits, &[&str])] = &[
        (
            &[("spine1", "spine1;sudo reboot")],
            &[
                "25:11: switch name `spine1;sudo reboot` may hold only letters, digits, `-`, `_` and `.`",
            ],
        ),
        (
            &[
                ("name: h1\n", "name: \"h1$(touch /tmp/pwned)\"\n"),
                ("[h1:ens1f0", "[\"h1$(touch /tmp/pwned):ens1f0\""),
            ],
            &[
                "72:11: host name `h1$(touch /tmp/pwned)` may hold only letters, digits, `-`, `_` and `.`",
            ],
        ),
        (
            &[("leaf1", "../../etc/cron.d/x")],
            &["45:11: switch name `../../etc/cron.d/x` must start with a letter or a digit"],
        ),
        (
            &[
                ("- name: r1\n", "- name: \"r1\\nx\"\n"),
                ("rack: r1", "rack: \"r1\\nx\""),
            ],
            &["17:11: rack name `r1\\nx` may hold only letters, digits, `-`, `_` and `.`"],
        ),
        (
            &[(
                "{name: Ethernet1/1, speed",
                "{name: \"Ethernet1/1\\nusername evil privilege 15 secret 0 x\", speed",
            )],
            &[
                "42:16: port `Ethernet1/1\\nusername evil privilege 15 secret 0 x` on spine2 is not a port name in eos's naming; expected EthernetN, EthernetN/M or EthernetN/M/K, or Port-ChannelN",
            ],
        ),
        (
            &[("{name: swp1, speed", "{name: \"swp1;reboot\", speed")],
            &[
                "53:16: port `swp1;reboot` on leaf1 is not a port name in cumulus's naming; expected a Linux interface name of up to 15 letters, digits, `-`, `_` or `.` starting with a letter (such as swp1 or swp1s0)",
            ],
        ),
        (
            &[(
                "nic: {name: ens1f0, pci: \"0000:3b:00.0\", mac: \"02:00:0a:01:01:0b\"",
                "nic: {name: \"ens/../x\", pci: \"0000:3b:00.0\", mac: \"02:00:0a:01:01:0b\"",
            )],
            &[
                "75:17: NIC name `ens/../x` may hold only printable characters other than `/`, `:`, `,`, `=`, brackets and spaces",
            ],
        ),
        // A name that would add DPDK arguments to the host's vdev (an XDP object of
        // the writer's choosing, loaded by root).
        (
            &[(
                "nic: {name: ens1f0, pci: \"0000:3b:00.0\", mac: \"02:00:0a:01:01:0b\"",
                "nic: {name: \"e,xdp_prog=x.o\", pci: \"0000:3b:00.0\", mac: \"02:00:0a:01:01:0b\"",
            )],
            &[
                "75:17: NIC name `e,xdp_prog=x.o` may hold only printable characters other than `/`, `:`, `,`, `=`, brackets and spaces",
            ],
        ),
        (
            &[(
                "address: 192.0.2.11}",
                "address: \"192.0.2.11 -oProxyCommand=x\"}",
            )],
            &[
                "28:21: `192.0.2.11 -oProxyCommand=x` is not a management address (an IPv4 or IPv6 address, or a host name)",
            ],
        ),
        (
            &[("user: cumulus}", "user: \"-oProxyCommand=x\"}")],
            &[
                "49:39: `-oProxyCommand=x` is not a user name (up to 32 letters, digits, `_`, `.` or `-`, not starting with `-` or `.`)",
            ],
        ),
    ];
    for (edits, problems) in cases {
        refused(&dir.lab(edits), problems);
    }
}

#[test]
fn remote_directories_stay_absolute_and_plain() {
    for dir in [
        "var/lib/mltctl",
        "/var/lib/mltctl/../../etc",
        "/var/./lib",
        "/tmp/a\nb",
    ] {
        let out = mltctl(&[
            "env",
            "-i",
            "inventory/lab.yaml",
            "--host",
            "h1",
            "--remote-dir",
            dir,
        ]);
        assert_eq!(out.status.code(), Some(2), "{dir:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("give an absolute directory without `.` or `..` parts"),
            "{}",
            text(&out.stderr)
        );
    }
}

// ------------------------------------------------------- bounded device text and files

/// A running-config directory holding the lab's base configurations, with `file`
/// replaced by `contents`.
fn running_with(dir: &Scratch, file: &str, contents: &str) -> PathBuf {
    let running = dir.path("running");
    std::fs::create_dir_all(&running).unwrap();
    for entry in std::fs::read_dir(fixture("tests/running/lab-base")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), running.join(entry.file_name())).unwrap();
    }
    std::fs::write(running.join(file), contents).unwrap();
    running
}

#[test]
fn ranges_in_running_configs_are_bounded_by_their_domain() {
    let dir = Scratch::new("ranges");
    let cases = [
        (
            "spine2.cfg",
            "qos map dscp 0-4294967295 to traffic-class 1\n",
            "switch spine2: running eos configuration, line 1: cannot read the DSCP map: \
             `0-4294967295` goes beyond 63, the largest value this list may hold",
        ),
        (
            "spine2.cfg",
            "qos map traffic-class 0-4294967295 to tx-queue 1\n",
            "switch spine2: running eos configuration, line 1: cannot read the traffic-class \
             map: `0-4294967295` goes beyond 7, the largest value this list may hold",
        ),
        (
            "leaf1.nvue",
            "nv set qos mapping default-global dscp 0-4294967295 switch-priority 1\n",
            "switch leaf1: running cumulus configuration, line 1: `0-4294967295` goes beyond \
             63, the largest value this list may hold",
        ),
    ];
    for (file, contents, message) in cases {
        let running = running_with(&dir, file, contents);
        let args = ["diff", "-i", "inventory/lab.yaml", "--running", s(&running)];
        let out = mltctl_within(&args, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{file}: diff was still running after 30 s"));
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stderr),
            format!(
                "mltctl: cannot compare 1 switch(es):\n  {}: {message}\n",
                running.join(file).display()
            )
        );
    }
}

/// An Onyx port range is looked up, never expanded: a range of four billion ports
/// costs nothing and applies to the plan's ports inside it.
#[test]
fn a_port_range_of_any_width_is_read_without_expanding_it() {
    let dir = Scratch::new("port-range");
    let base = std::fs::read_to_string(fixture("tests/running/lab-base/leaf2.cfg")).unwrap();
    let wide = format!("{base}interface ethernet 1/1-1/4294967295 qos trust L3\n");
    let running = running_with(&dir, "leaf2.cfg", &wide);
    let args = [
        "diff",
        "-i",
        "inventory/lab.yaml",
        "--running",
        s(&running),
        "--json",
    ];
    let out = mltctl_within(&args, Duration::from_secs(30)).expect("diff ends in time");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leaf2 = report["switches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["switch"] == "leaf2")
        .unwrap();
    let trust: Vec<&serde_json::Value> = leaf2["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["item"].as_str().unwrap().ends_with("qos trust"))
        .collect();
    assert!(
        trust.is_empty(),
        "the range set trust L3 on every port: {trust:?}"
    );
}

#[test]
fn a_running_config_that_is_not_a_file_is_refused_not_taken_as_empty() {
    let dir = Scratch::new("not-a-file");
    let running = running_with(&dir, "spine2.cfg", "");
    std::fs::remove_file(running.join("spine1.json")).unwrap();
    std::fs::create_dir(running.join("spine1.json")).unwrap();
    let out = mltctl(&["diff", "-i", "inventory/lab.yaml", "--running", s(&running)]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "mltctl: cannot compare 1 switch(es):\n  cannot read {}: not a regular file (it is a directory)\n",
            running.join("spine1.json").display()
        )
    );
}

#[test]
fn inputs_that_are_not_regular_files_are_refused_at_once() {
    let dir = Scratch::new("fifo");
    let fifo = dir.path("inventory.yaml");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    for (input, kind) in [(s(&fifo), "a FIFO"), ("/dev/zero", "a character device")] {
        let out = mltctl_within(&["validate", "-i", input], Duration::from_secs(10))
            .unwrap_or_else(|| panic!("validate -i {input} was still running after 10 s"));
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            format!("mltctl: cannot read {input}: not a regular file (it is {kind})\n")
        );
    }
}

#[test]
fn inventory_text_problems_have_places() {
    let dir = Scratch::new("text");
    let lab = std::fs::read(fixture("inventory/lab.yaml")).unwrap();
    std::fs::copy(fixture("inventory/vgg16.layers"), dir.path("vgg16.layers")).unwrap();

    // A byte-order mark is not part of the first key.
    let bom = dir.path("bom.yaml");
    std::fs::write(&bom, [b"\xEF\xBB\xBF".as_slice(), &lab].concat()).unwrap();
    let out = mltctl(&["validate", "-i", s(&bom)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Bytes that are not UTF-8 are placed by line and column.
    let latin1 = dir.path("latin1.yaml");
    let mut bytes = lab.clone();
    let at = bytes.windows(4).position(|w| w == b"name").unwrap();
    bytes.splice(at..at, *b"caf\xE9 ");
    std::fs::write(&latin1, bytes).unwrap();
    refused(
        &latin1,
        &["6:6: not UTF-8 text; an inventory must be UTF-8"],
    );

    // A second document is not silently ignored.
    let two = dir.path("two.yaml");
    std::fs::write(
        &two,
        [lab.as_slice(), b"---\nfabric: {name: other}\n"].concat(),
    )
    .unwrap();
    refused(
        &two,
        &["111:1: a second YAML document starts here; an inventory is one document"],
    );
}

// ------------------------------------------------------------------ checked arithmetic

#[test]
fn sizes_near_the_top_of_u64_cannot_wrap_past_the_checks() {
    let dir = Scratch::new("wrap");
    let layers = dir.lab(&[(
        "layers: {file: vgg16.layers}",
        "layers: {sizes: [9223372036854775807, 9223372036854775807, 2]}",
    )]);
    refused(
        &layers,
        &["105:20: `training.layers.sizes` must be between 1 and 1099511627776"],
    );
    let many = dir.lab(&[(
        "layers: {file: vgg16.layers}",
        "layers: {count: 1000000, params_each: 1099511627776}",
    )]);
    refused(
        &many,
        &[
            "105:11: the layers add up to more than 1125899906842624 parameters, more than any model mltctl can plan for",
        ],
    );
    let buffers = dir.lab(&[(
        "buffer_bytes: 33554432      # 32 MiB shared packet buffer",
        "buffer_bytes: 18446744073709551615",
    )]);
    refused(
        &buffers,
        &["29:19: `buffer_bytes` must be between 1 and 1099511627776"],
    );
}

// ------------------------------------------------------------------------ no secrets

const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\\n-----END OPENSSH PRIVATE KEY-----";
const PASSPHRASE: &str = "correct horse battery staple 42";
const SHADOW: &str = "root:$6$Zx9kq1Tz$Q8m0W3pVt7Ll9aQkJcXyZr0Tt5aZ1xQ:19700:0:99999:7:::";

/// Every output of `validate` and `validate --json` for `file`, as one text.
fn all_output(file: &Path) -> String {
    let text_run = mltctl(&["validate", "-i", s(file)]);
    let json_run = mltctl(&["validate", "-i", s(file), "--json"]);
    [text_run, json_run]
        .iter()
        .flat_map(|o| [text(&o.stdout), text(&o.stderr)])
        .collect()
}

fn assert_no_secret(output: &str) {
    for secret in [
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
        "OPENSSH PRIVATE KEY",
        "horse battery",
        "Q8m0W3pVt7Ll9aQkJcXyZr0Tt5aZ1xQ",
    ] {
        assert!(!output.contains(secret), "{secret} was printed:\n{output}");
    }
}

#[test]
fn secrets_in_any_input_slot_are_never_printed() {
    let dir = Scratch::new("secrets");
    std::fs::write(
        dir.path("shadow"),
        format!("{SHADOW}\ndaemon:*:19700:0:99999:7:::\n"),
    )
    .unwrap();
    let slots: &[(&str, String)] = &[
        (
            "key: {file: ~/.ssh/mltctl_ed25519}",
            format!("key: {{env: \"{KEY}\"}}"),
        ),
        (
            "key: {file: ~/.ssh/mltctl_ed25519}",
            format!("key: {{file: k, passphrase_env: \"{PASSPHRASE}\"}}"),
        ),
        (
            "layers: {file: vgg16.layers}",
            "layers: {file: shadow}".into(),
        ),
        ("name: spine1\n", format!("name: \"{KEY}\"\n")),
        ("address: 192.0.2.11}", format!("address: \"{KEY}\"}}")),
        ("user: cumulus}", format!("user: \"{SHADOW}\"}}")),
        ("job_id: 7", format!("job_id: 7\n  \"{KEY}\": 1")),
    ];
    for (from, to) in slots {
        let file = dir.lab(&[(from, to)]);
        let output = all_output(&file);
        assert!(output.contains("problem"), "{to}: not refused:\n{output}");
        assert_no_secret(&output);
    }
}

// ------------------------------------------------ remote commands and configuration lines

/// The files that build what mltctl sends to devices and hosts.
fn command_sources() -> Vec<(PathBuf, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture("src/hosts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for vendor in ["sonic", "eos", "cumulus", "onyx"] {
        files.push(fixture(&format!("switch-config/src/{vendor}/push.rs")));
    }
    files.push(fixture("switch-config/src/push.rs"));
    for part in ["mod", "exchange"] {
        files.push(fixture(&format!("src/ssh/{part}.rs")));
    }
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// The placeholders of the first string literal after `at` in `text`.
fn placeholders(text: &str, at: usize) -> Vec<String> {
    let rest = &text[at..];
    let start = rest.find('"').unwrap() + 1;
    let end = start
        + rest[start..]
            .find("\")")
            .or_else(|| rest[start..].find("\","))
            .unwrap();
    let literal = &rest[start..end];
    literal
        .split('{')
        .skip(1)
        .filter_map(|part| part.split_once('}').map(|(name, _)| name.to_string()))
        .collect()
}

/// Every value in a remote shell command is a quoted word: commands are built only with
/// `ShellCommand`, whose code parts must be string literals (no `format!`, no leaked
/// strings); CLI scripts interpolate only the session name and the rendered commands
/// (whose values the templates refuse control characters in).
#[test]
fn remote_commands_interpolate_nothing_unquoted() {
    let sources = command_sources();
    assert!(sources.len() >= 8, "{}", sources.len());
    for (path, text) in &sources {
        let file = path.display();
        assert!(
            !text.contains("leak("),
            "{file}: a leaked string could pose as code"
        );
        for pattern in ["ShellCommand::new(", ".code("] {
            for (at, _) in text.match_indices(pattern) {
                let argument = &text[at + pattern.len()..];
                assert!(
                    argument.starts_with('"') || argument.starts_with(')'),
                    "{file}: {pattern} takes a string literal: {}",
                    &argument[..argument.len().min(60)]
                );
            }
        }
        for pattern in ["run_cli(t, &format!(", "let script = format!("] {
            for (at, _) in text.match_indices(pattern) {
                for name in placeholders(text, at) {
                    assert!(
                        ["", "verb", "commands"].contains(&name.as_str()),
                        "{file}: a CLI script interpolates {{{name}}}"
                    );
                }
            }
        }
    }
}

// ------------------------------------------------ files: links, other users, journal

/// `render --out` into a directory where someone planted links at the names it writes
/// (and at the old fixed `.NAME.partial` names): refused naming the link, and no
/// target is written through; the directory itself a link is refused too.
#[test]
fn symlinked_outputs_are_refused_and_their_targets_untouched() {
    let dir = Scratch::new("symlinks");
    let clean = dir.path("clean");
    let out = mltctl(&["render", "-i", "inventory/lab.yaml", "--out", s(&clean)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let names: Vec<String> = std::fs::read_dir(&clean)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 4, "{names:?}");
    let victim = dir.path("victim");
    std::fs::write(&victim, "precious").unwrap();
    // Links at the old partial names only: render goes on, the targets stay.
    let partial = dir.path("partial");
    std::fs::create_dir(&partial).unwrap();
    for name in &names {
        std::os::unix::fs::symlink(&victim, partial.join(format!(".{name}.partial"))).unwrap();
    }
    let out = mltctl(&["render", "-i", "inventory/lab.yaml", "--out", s(&partial)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A link at a name render writes: refused, naming it.
    let planted = dir.path("planted");
    std::fs::create_dir(&planted).unwrap();
    std::os::unix::fs::symlink(&victim, planted.join(&names[0])).unwrap();
    let out = mltctl(&["render", "-i", "inventory/lab.yaml", "--out", s(&planted)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("is a symbolic link"), "{stderr}");
    assert!(stderr.contains(&names[0]), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // --out itself a link.
    let linked = dir.path("linked");
    std::os::unix::fs::symlink(&clean, &linked).unwrap();
    let out = mltctl(&["render", "-i", "inventory/lab.yaml", "--out", s(&linked)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is a symbolic link"));
}

/// A state directory others can write, a journal that is a link, a lock that is a
/// link: each refused before anything is sent, and no link's target is changed.
#[test]
fn the_state_directory_journal_and_locks_are_never_followed_or_shared() {
    let dir = Scratch::new("state");
    let victim = dir.path("victim");
    std::fs::write(&victim, "precious").unwrap();
    let apply = |state: &Path| {
        mltctl(&[
            "apply",
            "-i",
            "inventory/lab.yaml",
            "--limit",
            "spine1",
            "--state-dir",
            s(state),
        ])
    };
    let shared = dir.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = apply(&shared);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("writable by its group or by others (mode 0777)"),
        "{}",
        text(&out.stderr)
    );
    let linked = dir.path("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(&victim, linked.join("journal.jsonl")).unwrap();
    let out = apply(&linked);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is a symbolic link"),
        "{}",
        text(&out.stderr)
    );
    // A planted lock: spine1 fails at its lock, before any connection.
    let locked = dir.path("locked");
    std::fs::create_dir_all(locked.join("locks")).unwrap();
    std::os::unix::fs::symlink(&victim, locked.join("locks/spine1.lock")).unwrap();
    let out = apply(&locked);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stdout));
    let report = text(&out.stdout);
    assert!(
        report.contains("spine1.lock is a symbolic link"),
        "{report}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

fn journal_entry(run: &str, outcome: &str) -> mltctl::apply::journal::Entry {
    mltctl::apply::journal::Entry {
        time: "2026-11-25T10:00:00.000Z".into(),
        run: run.into(),
        kind: mltctl::apply::journal::Kind::Apply,
        of: None,
        device: "spine1".into(),
        vendor: "sonic".into(),
        endpoint: "192.0.2.1:22".into(),
        outcome: outcome.into(),
        changes: 1,
        before_sha256: None,
        after_sha256: None,
        owned_before: Some("{}".into()),
        owned_after: None,
        sent: Vec::new(),
        message: None,
        check: false,
    }
}

/// `history` and `rollback` read the journal through the bounded reader: a FIFO or
/// `/dev/zero` is refused at once; a line appended by someone without the journal's
/// key (a forged run that would decide what rollback pushes) makes both refuse the
/// journal, naming that line.
#[test]
fn a_journal_that_is_a_fifo_a_device_or_forged_is_refused() {
    let dir = Scratch::new("journal");
    let fifo = dir.path("fifo.jsonl");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let history = |journal: &str| {
        mltctl_within(
            &["history", "-i", "inventory/lab.yaml", "--journal", journal],
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| panic!("history --journal {journal} was still running after 10 s"))
    };
    for (journal, kind) in [(s(&fifo), "a FIFO"), ("/dev/zero", "a character device")] {
        let out = history(journal);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains(kind), "{}", text(&out.stderr));
    }
    let path = dir.path("state/journal.jsonl");
    let mut journal = mltctl::apply::journal::Journal::open(&path).unwrap();
    journal.append(&journal_entry("r1", "changed")).unwrap();
    drop(journal);
    let out = history(s(&path));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("r1"));
    // Someone appends a run of their own, in the journal's own form.
    let forged = serde_json::to_string(&journal_entry("r9", "changed")).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(
        &mut file,
        format!("{{\"chain\":\"{}\",{}\n", "ab".repeat(32), &forged[1..]).as_bytes(),
    )
    .unwrap();
    let out = history(s(&path));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("line 2"),
        "{}",
        text(&out.stderr)
    );
    let out = mltctl(&[
        "rollback",
        "-i",
        "inventory/lab.yaml",
        "--journal",
        s(&path),
        "--to",
        "r9",
        "--check",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("changed by something other than mltctl"),
        "{}",
        text(&out.stderr)
    );
}
