//! The onyx running-configuration parser (see running.rs).

#![no_main]

mod running;

use std::sync::OnceLock;

static INTENT: OnceLock<switch_config::SwitchIntent> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    running::check(&INTENT, include_str!("../intents/onyx.json"), data)
});
