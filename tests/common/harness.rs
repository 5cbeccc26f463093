//! The harness of test binaries whose tests need what a machine may lack (root,
//! network namespaces, sshd, DPDK, torch): every test is a trial, reported as ignored
//! — never as passed — where it cannot run, and each reason is said once on standard
//! error. The mltctl and endhost test binaries that need it include this file.

#![allow(dead_code)] // each test binary uses its own part

use libtest_mimic::{Arguments, Trial};

/// The trials of one test binary.
pub struct Suite {
    /// What the binary tests, for the reasons it prints.
    what: &'static str,
    trials: Vec<Trial>,
    said: Vec<String>,
    one_at_a_time: bool,
}

impl Suite {
    pub fn new(what: &'static str) -> Suite {
        Suite {
            what,
            trials: Vec::new(),
            said: Vec::new(),
            one_at_a_time: false,
        }
    }

    /// Adds test `name`, ignored (with the reason said) when `unavailable` says why it
    /// cannot run here.
    pub fn test(mut self, name: &'static str, test: fn(), unavailable: Option<&str>) -> Suite {
        if let Some(why) = unavailable
            && !self.said.iter().any(|s| s == why)
        {
            eprintln!("{} tests skipped: {why}", self.what);
            self.said.push(why.to_string());
        }
        let trial = Trial::test(name, move || {
            test();
            Ok(())
        });
        self.trials
            .push(trial.with_ignored_flag(unavailable.is_some()));
        self
    }

    /// Adds every `(name, test)` with the same `unavailable`.
    pub fn tests(self, tests: &[(&'static str, fn())], unavailable: Option<&str>) -> Suite {
        tests.iter().fold(self, |suite, &(name, test)| {
            suite.test(name, test, unavailable)
        })
    }

    /// Runs the tests one at a time (they share something a machine has once).
    pub fn one_at_a_time(mut self) -> Suite {
        self.one_at_a_time = true;
        self
    }

    pub fn run(self) -> ! {
        let mut args = Arguments::from_args();
        if self.one_at_a_time {
            args.test_threads = Some(1);
        }
        libtest_mimic::run(&args, self.trials).exit()
    }
}
