//! SONiC, as its manuals and the generic config updater design describe it.
//!
//! - CONFIG_DB is a set of tables; `sonic-cfggen -d --print-data` prints it as JSON,
//!   keys sorted, four-space indents. Empty tables do not exist.
//! - `config apply-patch FILE` applies an RFC 6902 JSON patch operation by operation;
//!   an operation that fails stops the patch and leaves the earlier ones applied (no
//!   automatic recovery). `--dry-run` shows the operations and changes nothing.
//!   `add` needs an existing parent, `remove` and `replace` an existing target.
//! - `config checkpoint NAME` saves CONFIG_DB, `config rollback NAME` restores it,
//!   `config delete-checkpoint NAME` forgets it, `config save -y` writes the startup
//!   file.
//! - systemd: `systemd-run --unit=U --on-active=SECONDS COMMAND…` runs COMMAND later
//!   unless `systemctl stop U.timer` comes first.

use serde_json::{Map, Value};

use super::{Device, Reply};

const DB: &str = "config_db.json";

pub fn install(device: &Device, initial: &str) {
    let db: Value = serde_json::from_str(initial).expect("the initial config_db is JSON");
    store(device, &db);
    device.write("startup.json", &print(&db));
}

pub fn running(device: &Device) -> String {
    device.read(DB).unwrap_or_default()
}

fn store(device: &Device, db: &Value) {
    device.write(DB, &print(db));
}

/// As `sonic-cfggen --print-data` prints: sorted keys, four-space indents, no empty
/// tables.
fn print(db: &Value) -> String {
    let mut db = db.clone();
    if let Some(tables) = db.as_object_mut() {
        tables.retain(|_, t| t.as_object().is_none_or(|o| !o.is_empty()));
    }
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(&db, &mut serializer).unwrap();
    String::from_utf8(out).unwrap() + "\n"
}

fn checkpoint_file(name: &str) -> String {
    format!("checkpoints/{name}.cp.json")
}

pub fn command(device: &Device, args: &[&str]) -> Reply {
    match args {
        ["sonic-cfggen", "-d", "--print-data"] => Reply::out(running(device)),
        ["show", "queue", "counters", "--json" | "-j"] => {
            Reply::out(super::counters::sonic_queues(device))
        }
        ["show", "queue", "wredcounters", "--json" | "-j"] => {
            Reply::out(super::counters::sonic_wred(device))
        }
        ["config", "checkpoint", name] => {
            device.write(&checkpoint_file(name), &running(device));
            Reply::out("Checkpoint created successfully.\n")
        }
        ["config", "rollback", name] => match device.read(&checkpoint_file(name)) {
            Some(saved) => {
                device.write(DB, &saved);
                Reply::out("Config rolled back successfully.\n")
            }
            None => Reply::fail(1, format!("Error: Checkpoint '{name}' does not exist\n")),
        },
        ["config", "delete-checkpoint", name] => {
            if device.remove(&checkpoint_file(name)) {
                Reply::out("Checkpoint deleted successfully.\n")
            } else {
                Reply::fail(1, format!("Error: Checkpoint '{name}' does not exist\n"))
            }
        }
        ["config", "save", "-y"] => {
            device.write("startup.json", &running(device));
            Reply::default()
        }
        ["config", "apply-patch", "--dry-run" | "-d", file] => apply_patch(device, file, true),
        ["config", "apply-patch", file] => apply_patch(device, file, false),
        ["systemd-run", rest @ ..] => systemd_run(device, rest),
        ["systemctl", "stop", unit] => match unit.strip_suffix(".timer") {
            Some(name) if device.cancel_timer(name) => Reply::default(),
            _ => Reply::fail(
                5,
                format!("Failed to stop {unit}: Unit {unit} not loaded.\n"),
            ),
        },
        _ => Reply::fail(2, format!("{}: unknown command\n", args.join(" "))),
    }
}

fn systemd_run(device: &Device, args: &[&str]) -> Reply {
    let mut unit = None;
    let mut seconds = None;
    let mut rest = args;
    while let Some(option) = rest.first().and_then(|a| a.strip_prefix("--")) {
        match option.split_once('=') {
            Some(("unit", u)) => unit = Some(u.to_string()),
            Some(("on-active", s)) => seconds = s.parse::<u64>().ok(),
            _ => return Reply::fail(1, format!("systemd-run: unknown option --{option}\n")),
        }
        rest = &rest[1..];
    }
    let (Some(unit), Some(seconds), false) = (unit, seconds, rest.is_empty()) else {
        return Reply::fail(
            1,
            "systemd-run: --unit, --on-active and a command are needed\n",
        );
    };
    if device.timer_pending(&unit) {
        return Reply::fail(
            1,
            format!("Failed to start transient timer unit: Unit {unit}.timer already exists.\n"),
        );
    }
    device.arm_timer(&unit, seconds, rest);
    Reply::out(format!("Running timer as unit: {unit}.timer\n"))
}

fn apply_patch(device: &Device, file: &str, dry_run: bool) -> Reply {
    let faults = device.faults();
    let Ok(text) = std::fs::read_to_string(file) else {
        return Reply::fail(1, format!("Error: cannot read {file}\n"));
    };
    let Ok(Value::Array(ops)) = serde_json::from_str::<Value>(&text) else {
        return Reply::fail(1, "Error: the patch is not a JSON array\n");
    };
    let mut db: Value = serde_json::from_str(&running(device)).unwrap();
    let mut report = String::from("Patch Applier: applying the patch\n");
    for op in &ops {
        let text = op.to_string();
        report.push_str(&format!("  {text}\n"));
        if dry_run || faults.ignores(&text) {
            continue;
        }
        let result = if faults.rejects(&text) {
            Err("rejected by the switch".to_string())
        } else {
            apply_op(&mut db, op)
        };
        if let Err(e) = result {
            store(device, &db);
            return Reply {
                stdout: report,
                stderr: format!("Error: Failed to apply patch: {e}: {text}\n"),
                status: 1,
                ..Reply::default()
            };
        }
    }
    if dry_run {
        return Reply::out(format!("{report}Patch would be applied (dry run).\n"));
    }
    store(device, &db);
    let faults = device.faults();
    Reply {
        stdout: format!("{report}Patch applied successfully.\n"),
        drop_connection: faults.drop_after_commit,
        ..Reply::default()
    }
}

/// One RFC 6902 operation (add, remove, replace) on `db`.
fn apply_op(db: &mut Value, op: &Value) -> Result<(), String> {
    let path = op["path"].as_str().ok_or("no path")?;
    let tokens: Vec<String> = path
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let (last, parents) = tokens
        .split_last()
        .ok_or("the whole document cannot change")?;
    let mut parent = &mut *db;
    for token in parents {
        parent = parent
            .get_mut(token.as_str())
            .ok_or_else(|| format!("path {path} does not exist"))?;
    }
    let parent: &mut Map<String, Value> = parent
        .as_object_mut()
        .ok_or_else(|| format!("{path}: parent is not an object"))?;
    match op["op"].as_str() {
        Some("add") => {
            let value = op.get("value").ok_or("add without value")?;
            parent.insert(last.clone(), value.clone());
        }
        Some("replace") => {
            let value = op.get("value").ok_or("replace without value")?;
            let slot = parent
                .get_mut(last.as_str())
                .ok_or_else(|| format!("path {path} does not exist"))?;
            *slot = value.clone();
        }
        Some("remove") => {
            parent
                .remove(last.as_str())
                .ok_or_else(|| format!("path {path} does not exist"))?;
        }
        other => return Err(format!("unsupported op {other:?}")),
    }
    valid_tables(db)
}

/// The shape every CONFIG_DB table has (the YANG models check this and more): objects
/// of objects whose fields are strings or lists of strings.
fn valid_tables(db: &Value) -> Result<(), String> {
    let is_field =
        |v: &Value| v.is_string() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    for (table, objects) in db.as_object().ok_or("CONFIG_DB is not an object")? {
        let objects = objects
            .as_object()
            .ok_or_else(|| format!("YANG validation failed: table {table} is not an object"))?;
        for (key, fields) in objects {
            let valid = fields.as_object().is_some_and(|f| f.values().all(is_field));
            if !valid {
                return Err(format!(
                    "YANG validation failed: {table}|{key} is malformed"
                ));
            }
        }
    }
    Ok(())
}

/// The queueing CONFIG_DB describes: each port's DSCP_TO_TC_MAP and TC_TO_QUEUE_MAP
/// (PORT_QOS_MAP), and per queue its SCHEDULER (`STRICT` or not), WRED_PROFILE (`ecn`
/// other than `ecn_none`: the curve marks ECN-capable packets and drops the others;
/// `ecn_none`: it drops) and BUFFER_QUEUE profile (`static_th`: the queue's limit).
/// Keys may list ports (`Ethernet0,Ethernet4`) and queues (`1-3,5`), as SONiC allows.
pub fn qos(device: &Device) -> crate::qos::SwitchQos {
    use crate::qos::{Curve, PortQos, SwitchQos};
    let db: Value = serde_json::from_str(&running(device)).unwrap_or_default();
    let table = |name: &str| {
        db.get(name)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let field = |table: &Map<String, Value>, key: &str, field: &str| -> Option<String> {
        table.get(key)?.get(field)?.as_str().map(str::to_string)
    };
    let (dscp_maps, tc_maps) = (table("DSCP_TO_TC_MAP"), table("TC_TO_QUEUE_MAP"));
    let (schedulers, wred) = (table("SCHEDULER"), table("WRED_PROFILE"));
    let buffer_profiles = table("BUFFER_PROFILE");
    let mut qos = SwitchQos::default();
    for (port, maps) in table("PORT_QOS_MAP") {
        let lookup = |maps_table: &Map<String, Value>, name: Option<&str>, key: usize| {
            name.and_then(|n| maps_table.get(n))
                .and_then(|m| m.get(key.to_string()))
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<u8>().ok())
        };
        let dscp_map = maps.get("dscp_to_tc_map").and_then(Value::as_str);
        let tc_map = maps.get("tc_to_queue_map").and_then(Value::as_str);
        let map: [u8; 64] = std::array::from_fn(|d| {
            let class = lookup(&dscp_maps, dscp_map, d).unwrap_or(0);
            lookup(&tc_maps, tc_map, class as usize).unwrap_or(class)
        });
        for port in port.split(',') {
            qos.ports.insert(port.to_string(), PortQos::mapped(map));
        }
    }
    let mut each_queue =
        |table_name: &str,
         apply: &mut dyn FnMut(&mut crate::qos::QueueQos, &Map<String, Value>)| {
            for (key, fields) in table(table_name) {
                let (Some((ports, queues)), Some(fields)) =
                    (key.split_once('|'), fields.as_object())
                else {
                    continue;
                };
                let Some(queues) = super::numbers(queues) else {
                    continue;
                };
                for port in ports.split(',') {
                    let port_qos = qos
                        .ports
                        .entry(port.to_string())
                        .or_insert_with(|| PortQos::mapped(std::array::from_fn(|_| 0)));
                    for &q in &queues {
                        if let Ok(q) = u8::try_from(q) {
                            apply(port_qos.queues.entry(q).or_default(), fields);
                        }
                    }
                }
            }
        };
    each_queue("QUEUE", &mut |queue, fields| {
        let text = |f: &str| fields.get(f).and_then(Value::as_str).map(str::to_string);
        if let Some(scheduler) = text("scheduler") {
            queue.strict = field(&schedulers, &scheduler, "type").as_deref() == Some("STRICT");
        }
        if let Some(profile) = text("wred_profile") {
            let number = |f: &str| field(&wred, &profile, f).and_then(|v| v.parse::<u64>().ok());
            let curve = match (number("green_min_threshold"), number("green_max_threshold")) {
                (Some(min_bytes), Some(max_bytes))
                    if field(&wred, &profile, "wred_green_enable").as_deref() == Some("true") =>
                {
                    Some(Curve {
                        min_bytes,
                        max_bytes,
                        max_percent: number("green_drop_probability")
                            .and_then(|p| u8::try_from(p).ok())
                            .unwrap_or(100),
                    })
                }
                _ => None,
            };
            match field(&wred, &profile, "ecn").as_deref() {
                None | Some("ecn_none") => queue.drop_all = curve,
                Some(_) => {
                    queue.mark = curve;
                    queue.drop_not_ect = curve;
                }
            }
        }
    });
    each_queue("BUFFER_QUEUE", &mut |queue, fields| {
        queue.limit_bytes = fields
            .get("profile")
            .and_then(Value::as_str)
            .and_then(|p| field(&buffer_profiles, p, "static_th"))
            .and_then(|t| t.parse().ok());
    });
    qos
}
