//! Values are data (control characters refused, foreign words quoted, fuzz seeds), and
//! any valid inventory renders and reads back.

use super::*;

/// A value with a control character would add a line of its own to a configuration
/// (a newline in a port name: `username evil …`); every vendor refuses it, or (NVUE's
/// default-global QoS names no port) never writes it.
#[test]
fn a_control_character_in_any_value_is_refused() {
    let plan = lab_plan();
    for name in ["spine1", "spine2", "leaf1", "leaf2"] {
        let mut hostile = intent(&plan, name).clone();
        hostile.qos.ports[0].push_str("\nusername evil privilege 15 secret 0 x");
        match switch_config::render(&hostile) {
            Err(e) => {
                let err = e.to_string();
                assert!(
                    err.contains("a control character cannot go into a configuration line")
                        || err.contains("cannot express port"),
                    "{name}: {err}"
                );
                assert!(!err.contains('\n'), "{name}: {err}");
            }
            Ok(text) => assert!(!text.contains("username evil"), "{name}:\n{text}"),
        }
    }
}

/// NVUE commands run through a shell: a foreign next hop a switch prints (inside the
/// plan's scope, so it is to be removed) reaches that shell as one quoted word.
#[test]
fn foreign_words_in_nvue_commands_are_quoted() {
    let plan = lab_plan();
    let leaf1 = intent(&plan, "leaf1");
    let owned = leaf1.route_scope[0];
    let running = format!(
        "{}nv set vrf default router static {owned} via $(reboot)\n",
        switch_config::render(leaf1).unwrap()
    );
    let diff = switch_config::diff(leaf1, Some(&running)).unwrap();
    assert_eq!(
        diff.commands,
        format!("nv unset vrf default router static {owned} via '$(reboot)'\n")
    );
}

/// The fuzz targets' seeds (fuzz/seeds/running_VENDOR/), read as CI reads them: real
/// configurations parse; ranges past their domain are errors that name the limit;
/// nothing panics. The targets themselves run with `cargo fuzz` (docs/src/admin/security.md#fuzzing).
#[test]
fn the_running_config_fuzz_seeds_parse_or_are_refused() {
    for vendor in ["sonic", "eos", "cumulus", "onyx"] {
        let json =
            std::fs::read_to_string(fixture(&format!("fuzz/intents/{vendor}.json"))).unwrap();
        let intent: SwitchIntent = serde_json::from_str(&json).unwrap();
        let seeds = fixture(&format!("fuzz/seeds/running_{vendor}"));
        let mut count = 0;
        for entry in std::fs::read_dir(&seeds).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let result = switch_config::diff(&intent, Some(&text));
            if name.starts_with("huge-") {
                let Err(err) = result else {
                    panic!("{name}: read without error");
                };
                let err = err.to_string();
                assert!(
                    err.contains("the largest value") || err.contains("at most"),
                    "{name}: {err}"
                );
            } else {
                if let Err(e) = result {
                    panic!("{name}: {e}");
                }
                let same = switch_config::revert(&intent, &text, &text).unwrap();
                assert!(same.changes.is_empty(), "{name}");
            }
            count += 1;
        }
        assert!(count >= 3, "{vendor}: {count} seeds");
    }
}

// ---------------------------------------------------------------- any valid inventory

fn vendor_strategy() -> impl proptest::strategy::Strategy<Value = Vendor> {
    proptest::sample::select(Vendor::ALL.to_vec())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Every fabric that validates — 1 to 4 spines, 1 to 6 racks of 0 to 4 hosts, any
    /// vendor in any role — renders on every switch, diffs against an empty switch and
    /// against its own rendering without a panic, and its own rendering shows no
    /// difference.
    #[test]
    fn any_valid_inventory_renders_and_reads_back(
        spines in proptest::collection::vec(vendor_strategy(), 1..=4),
        leaves in proptest::collection::vec((vendor_strategy(), 0usize..=4), 1..=6),
    ) {
        let shape = mltctl::generate::Shape { spines, leaves, layers: 12, params_per_layer: 5000, buffer_bytes: None };
        let Ok(yaml) = mltctl::generate::fabric_yaml_shaped(&shape) else {
            return Ok(()); // no host at all: not a fabric
        };
        let inv = match inventory::load_str(Path::new("shaped.yaml"), &yaml) {
            Ok(inv) => inv,
            Err(e) => panic!("the generated fabric does not validate: {e}\n{yaml}"),
        };
        let plan = Plan::build(&inv);
        for switch in &plan.switches {
            let intent = &switch.intent;
            let rendered = switch_config::render(intent)
                .unwrap_or_else(|e| panic!("{}: {e}", intent.name));
            switch_config::diff(intent, None).unwrap();
            let same = switch_config::diff(intent, Some(&rendered)).unwrap();
            proptest::prop_assert!(same.changes.is_empty(), "{}: {:?}", intent.name, same.changes);
        }
    }
}
