//! Queue counters read from each vendor's documented print form (the samples under
//! tests/running/counters, SOURCES.md there names the examples they follow).

use super::*;
use switch_config::counters::{Count, QueueCount, Reading};
use switch_config::{cumulus, eos, onyx, sonic};

fn sample(file: &str) -> String {
    std::fs::read_to_string(fixture(&format!("tests/running/counters/{file}"))).unwrap()
}

fn lab_intent(switch: &str) -> SwitchIntent {
    intent(&lab_plan(), switch).clone()
}

fn at<'r>(reading: &'r Reading, port: &str, queue: u8) -> &'r QueueCount {
    reading
        .queue(port, queue)
        .unwrap_or_else(|| panic!("no counters for {port} queue {queue}: {reading:?}"))
}

fn unexposed_saying(count: &Count, words: &str) -> bool {
    matches!(count, Count::Unexposed { unexposed } if unexposed.contains(words))
}

#[test]
fn sonic_queue_and_wred_counters_are_read_per_unicast_queue() {
    let spine1 = lab_intent("spine1");
    let reading = sonic::counters::parse(
        &spine1,
        &sample("sonic/spine1-queue-counters-202505.json"),
        Ok(&sample("sonic/spine1-wred-counters-202505.json")),
    )
    .unwrap();
    // Eight unicast queues on each of the plan's two ports; MC and ALL left out.
    assert_eq!(reading.queues.len(), 16);
    let q6 = at(&reading, "Ethernet4", 6);
    assert_eq!(q6.packets, Count::Known(2600));
    assert_eq!(q6.dropped, Count::Known(18));
    assert_eq!(q6.wred_dropped, Count::Known(6));
    assert_eq!(q6.marked, Count::Known(26));
    assert_eq!(at(&reading, "Ethernet0", 5).marked, Count::Known(15));
    assert_eq!(at(&reading, "Ethernet0", 0).marked, Count::Known(0));
}

#[test]
fn sonic_before_202505_has_no_per_queue_marks_and_says_so() {
    let spine1 = lab_intent("spine1");
    let said = sample("sonic/wredcounters-202311.stderr");
    let why = format!(
        "`show queue wredcounters --json` failed ({})",
        said.lines().last().unwrap()
    );
    let reading = sonic::counters::parse(
        &spine1,
        &sample("sonic/spine1-queue-counters-202505.json"),
        Err(&why),
    )
    .unwrap();
    let q6 = at(&reading, "Ethernet0", 6);
    assert_eq!(q6.packets, Count::Known(1600));
    assert!(unexposed_saying(&q6.marked, "No such command"), "{q6:?}");
    assert!(unexposed_saying(&q6.wred_dropped, "wredcounters"), "{q6:?}");
}

#[test]
fn sonic_na_cells_are_unexposed_never_zero() {
    let spine1 = lab_intent("spine1");
    let text = sample("sonic/spine1-queue-counters-202505.json").replacen(
        "\"totalpacket\": \"1000\"",
        "\"totalpacket\": \"N/A\"",
        1,
    );
    let reading = sonic::counters::parse(&spine1, &text, Err("none")).unwrap();
    assert_eq!(
        at(&reading, "Ethernet0", 0).packets,
        Count::unexposed("Counter/pkts: printed as `N/A`")
    );
    let missing_port =
        sample("sonic/spine1-queue-counters-202505.json").replace("Ethernet4", "Ethernet8");
    let err = sonic::counters::parse(&spine1, &missing_port, Err("none")).unwrap_err();
    assert!(
        err.to_string().contains("no counters for port Ethernet4"),
        "{err}"
    );
}

#[test]
fn eos_counters_are_summed_over_drop_precedences_and_dashes_are_unexposed() {
    let spine2 = lab_intent("spine2");
    let reading =
        eos::counters::parse(&spine2, &sample("eos/spine2-queue-and-ecn-counters.json")).unwrap();
    assert_eq!(reading.queues.len(), 16);
    let q6 = at(&reading, "Ethernet2/1", 6);
    assert_eq!(q6.packets, Count::Known(760 + 4));
    assert_eq!(q6.dropped, Count::Known(6 + 1));
    assert_eq!(q6.marked, Count::Known(13));
    assert!(unexposed_saying(
        &q6.wred_dropped,
        "EOS counts no WRED drops"
    ));
    assert!(unexposed_saying(
        &at(&reading, "Ethernet1/1", 2).marked,
        "random-detect ecn count"
    ));
    let one_document = sample("eos/spine2-queue-and-ecn-counters.json");
    let first = &one_document[..one_document.find("\n{").unwrap()];
    assert!(eos::counters::parse(&spine2, first).is_err());
}

#[test]
fn nvue_counters_are_read_per_traffic_class_and_old_releases_lack_marks() {
    let leaf1 = lab_intent("leaf1");
    let reading =
        cumulus::counters::parse(&leaf1, &sample("cumulus/leaf1-counters-qos-5.9.json")).unwrap();
    assert_eq!(reading.queues.len(), 32);
    let q6 = at(&reading, "swp31", 6);
    assert_eq!(q6.packets, Count::Known(306));
    assert_eq!(q6.dropped, Count::Known(2));
    assert_eq!(q6.wred_dropped, Count::Known(3));
    assert_eq!(q6.marked, Count::Known(36));
    let old =
        cumulus::counters::parse(&leaf1, &sample("cumulus/leaf1-counters-qos-5.5.json")).unwrap();
    assert_eq!(
        at(&old, "swp31", 6).marked,
        Count::unexposed("ecn-marked-frames: not printed")
    );
    assert_eq!(
        cumulus::counters::command(&leaf1).as_str(),
        "nv show interface swp1 counters qos -o json && nv show interface swp2 counters qos -o json && \
         nv show interface swp31 counters qos -o json && nv show interface swp32 counters qos -o json"
    );
}

#[test]
fn onyx_counts_packets_and_red_drops_per_class_and_marks_per_port_only() {
    let leaf2 = lab_intent("leaf2");
    let reading = onyx::counters::parse(
        &leaf2,
        &sample("onyx/leaf2-congestion-control.json"),
        Ok(&sample("onyx/leaf2-counters-tc.txt")),
    )
    .unwrap();
    // The plan's four ports, eight classes each; Eth1/3 is not the plan's.
    assert_eq!(reading.queues.len(), 32);
    assert!(reading.queues.iter().all(|q| q.port != "Eth1/3"));
    let q6 = at(&reading, "Eth1/31", 6);
    assert_eq!(q6.packets, Count::Known(4067));
    assert_eq!(q6.dropped, Count::Known(3));
    assert_eq!(q6.wred_dropped, Count::Known(8));
    assert!(unexposed_saying(&q6.marked, "per port only"));
    assert_eq!(at(&reading, "Eth1/1", 0).packets, Count::Known(1000));
    assert!(unexposed_saying(
        &at(&reading, "Eth1/31", 0).wred_dropped,
        "no RED or ECN curve"
    ));
    assert_eq!(reading.port_marks["Eth1/32"], Count::Known(43));
}

#[test]
fn onyx_names_a_class_counter_it_was_not_given() {
    let leaf2 = lab_intent("leaf2");
    let congestion = sample("onyx/leaf2-congestion-control.json");
    // A release that refuses the per-class command.
    let refused = onyx::counters::parse(&leaf2, &congestion, Err("`show …` was refused")).unwrap();
    assert!(unexposed_saying(
        &at(&refused, "Eth1/1", 6).packets,
        "was refused"
    ));
    // A block without a `packets` line, one with `N/A`, and a port printed by no block.
    let printed = "switch [standalone: master] # \nEth1/1:\n\n  TC 6:\n    N/A                   packets\n    0                     unicast no buffer discard\nEth1/2:\n  TC 6:\n    0                     unicast no buffer discard\n";
    let partial = onyx::counters::parse(&leaf2, &congestion, Ok(printed)).unwrap();
    assert!(unexposed_saying(
        &at(&partial, "Eth1/1", 6).packets,
        "printed as `N/A`"
    ));
    assert_eq!(at(&partial, "Eth1/1", 6).dropped, Count::Known(0));
    assert!(unexposed_saying(
        &at(&partial, "Eth1/2", 6).packets,
        "not printed for Eth1/2 TC 6"
    ));
    assert!(unexposed_saying(
        &at(&partial, "Eth1/31", 6).packets,
        "Eth1/31 TC 6: not printed"
    ));
}
