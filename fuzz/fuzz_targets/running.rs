//! Any bytes as one vendor's running configuration, read against the lab plan's
//! intent for a switch of that vendor (`fuzz/intents/`): the parser reads it or refuses
//! it with an error — it never panics, and device text never makes it allocate past
//! its bounds — and whatever it reads, compared with itself, shows no difference.

use std::sync::OnceLock;

use switch_config::SwitchIntent;

pub fn check(intent: &'static OnceLock<SwitchIntent>, json: &str, data: &[u8]) {
    let intent = intent.get_or_init(|| serde_json::from_str(json).expect("a valid intent"));
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if switch_config::diff(intent, Some(text)).is_ok() {
        let same = switch_config::revert(intent, text, text).expect("read once, read twice");
        assert!(same.changes.is_empty(), "{:?}", same.changes);
    }
}
