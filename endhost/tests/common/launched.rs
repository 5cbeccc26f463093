//! Launched transports on loopback, as `mltctl launch` starts them: `endhost serve
//! --detach` per host, files in one scratch directory; stopped when dropped. Shared by
//! the tests that start them (daemon.rs, python.rs).

use std::path::PathBuf;
use std::process::{Command, Output};

use endhost_core::config::TransportConfig;

const ENDHOST: &str = env!("CARGO_BIN_EXE_endhost");

pub fn endhost(args: &[&str]) -> Output {
    Command::new(ENDHOST).args(args).output().unwrap()
}

pub struct Launched {
    dir: PathBuf,
    hosts: u32,
}

impl Launched {
    /// Starts one transport per configuration (host h is `configs[h]`) in a scratch
    /// directory named after `name`; the caller waits for them (`endhost status --wait`).
    pub fn start(name: &str, configs: Vec<TransportConfig>) -> Launched {
        Launched::start_with(name, configs, &[])
    }

    /// As `start`, with `serve` given `extra` arguments too (`{host}` in one is the
    /// host's number).
    pub fn start_with(name: &str, configs: Vec<TransportConfig>, extra: &[&str]) -> Launched {
        // Removed by Drop. Others may enter (not write): tests connect to the sockets
        // as other users, and it is the sockets' modes that must keep them out.
        let dir = mlt_common::files::scratch_dir(&format!("endhost-{name}-"))
            .unwrap()
            .keep();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let launched = Launched {
            dir,
            hosts: configs.len() as u32,
        };
        for (h, config) in configs.into_iter().enumerate() {
            let h = h as u32;
            let file = |ext| launched.file(h, ext);
            std::fs::write(file("json"), serde_json::to_string(&config).unwrap()).unwrap();
            let [json, sock, pid, log] = ["json", "sock", "pid", "log"].map(file);
            let mut args = vec![
                "serve",
                "--config",
                &json,
                "--socket",
                &sock,
                "--pid-file",
                &pid,
                "--log",
                &log,
                "--connect-timeout",
                "20",
                "--detach",
            ];
            let extra: Vec<String> = extra
                .iter()
                .map(|a| a.replace("{host}", &h.to_string()))
                .collect();
            args.extend(extra.iter().map(String::as_str));
            let out = endhost(&args);
            assert!(out.status.success(), "{out:?}");
        }
        launched
    }

    pub fn file(&self, host: u32, ext: &str) -> String {
        self.dir
            .join(format!("h{host}.{ext}"))
            .display()
            .to_string()
    }

    /// Every host's log, for a failure message: why a transport stopped or stalled.
    pub fn logs(&self) -> String {
        (0..self.hosts)
            .map(|h| {
                let log = std::fs::read_to_string(self.file(h, "log")).unwrap_or_default();
                format!("--- host {h} log:\n{log}")
            })
            .collect()
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        for h in 0..self.hosts {
            let _ = endhost(&["stop", "--pid-file", &self.file(h, "pid"), "--grace", "2"]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
