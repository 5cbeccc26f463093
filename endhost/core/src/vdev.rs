//! A DPDK virtual device, as EAL's `--vdev` takes it (`net_af_xdp0,iface=eth0,…`),
//! held as typed parts: a driver we support, its instance number, and arguments from
//! that driver's list, each value by its grammar. Nothing is pasted into the string: a
//! `,` or `=` in a value would start an argument of its own (an interface named
//! `e,xdp_prog=x.o` would make a root process load someone's XDP object), so values
//! can hold neither, nor whitespace or DPDK's list brackets. `xdp_prog` is endhost's
//! own (its XDP program, [`Vdev::with_program`]) and never read from a configuration.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use mlt_common::names::check_ifname;

/// The virtual-device drivers endhost runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VdevDriver {
    AfPacket,
    AfXdp,
    Memif,
}

impl VdevDriver {
    pub const ALL: [VdevDriver; 3] = [VdevDriver::AfPacket, VdevDriver::AfXdp, VdevDriver::Memif];

    /// DPDK's name for the driver.
    pub fn name(self) -> &'static str {
        match self {
            VdevDriver::AfPacket => "net_af_packet",
            VdevDriver::AfXdp => "net_af_xdp",
            VdevDriver::Memif => "net_memif",
        }
    }

    /// The arguments a configuration may give this driver, and each value's grammar.
    fn arguments(self) -> &'static [(&'static str, Value)] {
        match self {
            VdevDriver::AfPacket => &[
                ("iface", Value::Interface),
                ("qpairs", Value::Number),
                ("blocksz", Value::Number),
                ("framesz", Value::Number),
                ("framecnt", Value::Number),
                ("qdisc_bypass", Value::Number),
            ],
            VdevDriver::AfXdp => &[
                ("iface", Value::Interface),
                ("start_queue", Value::Number),
                ("queue_count", Value::Number),
                ("shared_umem", Value::Number),
                ("busy_budget", Value::Number),
                ("force_copy", Value::Number),
            ],
            VdevDriver::Memif => &[
                ("role", Value::Word),
                ("id", Value::Number),
                ("socket", Value::Path),
                ("socket-abstract", Value::Word),
                ("zero-copy", Value::Word),
                ("rsize", Value::Number),
                ("bsize", Value::Number),
                ("mac", Value::Word),
            ],
        }
    }
}

/// What a value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// A network interface: the kernel's rule, less what devargs give meaning to.
    Interface,
    Number,
    /// Letters, digits, `-`, `_`, `.` and `:` (a role, yes/no, a MAC address).
    Word,
    /// An absolute path on a safe alphabet.
    Path,
}

impl Value {
    fn check(self, value: &str) -> Result<(), String> {
        let ok = match self {
            Value::Interface => return check_ifname(value).map_err(str::to_string),
            Value::Number => !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()),
            Value::Word => {
                !value.is_empty()
                    && value.len() <= 64
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
            }
            Value::Path => {
                value.starts_with('/')
                    && value.len() <= 4096
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"/-_.+@%".contains(&b))
            }
        };
        if ok {
            Ok(())
        } else {
            Err(match self {
                Value::Interface => unreachable!("returned above"),
                Value::Number => "must be a whole number".into(),
                Value::Word => "may hold only letters, digits, `-`, `_`, `.` and `:`".into(),
                Value::Path => "must be an absolute path of letters, digits and `/-_.+@%`".into(),
            })
        }
    }
}

/// A virtual device: driver, instance, arguments in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vdev {
    driver: VdevDriver,
    instance: u8,
    arguments: Vec<(&'static str, String)>,
}

/// Why a vdev was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("vdev `{vdev}`: {why}")]
pub struct VdevError {
    vdev: String,
    why: String,
}

impl Vdev {
    /// A device of `driver` with no arguments yet.
    pub fn new(driver: VdevDriver, instance: u8) -> Vdev {
        Vdev {
            driver,
            instance,
            arguments: Vec::new(),
        }
    }

    /// The device with `key` set to `value` (replacing an earlier value), if the driver
    /// takes `key` and `value` keeps to its grammar.
    pub fn with(mut self, key: &str, value: impl ToString) -> Result<Vdev, VdevError> {
        let value = value.to_string();
        let refuse = |why: String| VdevError {
            vdev: format!("{self}"),
            why,
        };
        let Some(&(key, grammar)) = self.driver.arguments().iter().find(|(k, _)| *k == key) else {
            let why = if key == "xdp_prog" {
                "xdp_prog is endhost's own (it loads its XDP program), not a setting".into()
            } else {
                let known: Vec<&str> = self.driver.arguments().iter().map(|(k, _)| *k).collect();
                format!(
                    "{} takes no argument `{}` (it takes {})",
                    self.driver.name(),
                    key.escape_default(),
                    known.join(", ")
                )
            };
            return Err(refuse(why));
        };
        grammar
            .check(&value)
            .map_err(|rule| refuse(format!("{key} `{}` {rule}", value.escape_default())))?;
        self.arguments.retain(|(k, _)| *k != key);
        self.arguments.push((key, value));
        Ok(self)
    }

    pub fn driver(&self) -> VdevDriver {
        self.driver
    }

    /// The value given for `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.arguments
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The EAL argument with endhost's XDP program at `program` (af_xdp only): the one
    /// way `xdp_prog` reaches a device, and only with a path of the safe alphabet.
    pub fn with_program(&self, program: &std::path::Path) -> Result<String, VdevError> {
        let path = program.to_str().unwrap_or_default();
        Value::Path.check(path).map_err(|rule| VdevError {
            vdev: self.to_string(),
            why: format!("the XDP program's path {} {rule}", path.escape_default()),
        })?;
        Ok(format!("{self},xdp_prog={path}"))
    }
}

impl fmt::Display for Vdev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.driver.name(), self.instance)?;
        for (key, value) in &self.arguments {
            write!(f, ",{key}={value}")?;
        }
        Ok(())
    }
}

impl FromStr for Vdev {
    type Err = VdevError;

    fn from_str(text: &str) -> Result<Vdev, VdevError> {
        let refuse = |why: String| VdevError {
            vdev: text.escape_default().to_string(),
            why,
        };
        let mut parts = text.split(',');
        let name = parts.next().unwrap_or_default();
        let (driver, instance) = VdevDriver::ALL
            .iter()
            .find_map(|d| {
                let digits = name.strip_prefix(d.name())?;
                let ok =
                    (1..=3).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
                ok.then(|| digits.parse::<u8>().ok().map(|n| (*d, n)))?
            })
            .ok_or_else(|| {
                let names: Vec<&str> = VdevDriver::ALL.iter().map(|d| d.name()).collect();
                refuse(format!(
                    "the device must be one of {} with an instance number (as net_af_xdp0)",
                    names.join(", ")
                ))
            })?;
        let mut vdev = Vdev::new(driver, instance);
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| refuse(format!("`{}` is not key=value", part.escape_default())))?;
            if vdev.get(key).is_some() {
                return Err(refuse(format!("{} is given twice", key.escape_default())));
            }
            vdev = vdev.with(key, value).map_err(|e| refuse(e.why))?;
        }
        Ok(vdev)
    }
}

impl Serialize for Vdev {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Vdev {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Vdev, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_round_trip_through_their_string() {
        for text in [
            "net_af_packet0,iface=eth0,qpairs=4",
            "net_af_xdp0,iface=ens1f0,start_queue=0,queue_count=4",
            "net_memif0,role=client,id=0,socket=/run/endhost/a.memif,socket-abstract=no",
        ] {
            let vdev: Vdev = text.parse().unwrap();
            assert_eq!(vdev.to_string(), text);
        }
        let built = Vdev::new(VdevDriver::AfXdp, 0)
            .with("iface", "eth0")
            .unwrap()
            .with("queue_count", 2)
            .unwrap();
        assert_eq!(built.to_string(), "net_af_xdp0,iface=eth0,queue_count=2");
        assert_eq!(built.get("iface"), Some("eth0"));
    }

    /// Every value that could add an argument (`,`, `=`, whitespace, DPDK's list
    /// brackets) is refused for every argument of every driver, least of all one that
    /// smuggles `xdp_prog`; interface names keep to the kernel's rule as well.
    #[test]
    fn hostile_names_never_reach_the_string() {
        let hostile = [
            "e,xdp_prog=x.o",
            "/e,xdp_prog=/x.o",
            "e=1",
            "eth 0",
            "eth\t0",
            "eth0\n",
            "a[b",
            "c]d",
            "",
        ];
        for driver in VdevDriver::ALL {
            for (key, _) in driver.arguments() {
                for value in hostile {
                    let built = Vdev::new(driver, 0).with(key, value);
                    assert!(built.is_err(), "{driver:?} {key}={value:?} was accepted");
                }
            }
        }
        for name in ["a/b", "a:b", "abcdefghijklmnop", ".."] {
            for driver in [VdevDriver::AfPacket, VdevDriver::AfXdp] {
                assert!(Vdev::new(driver, 0).with("iface", name).is_err(), "{name}");
            }
        }
        let err = "net_af_xdp0,iface=e,xdp_prog=x.o"
            .parse::<Vdev>()
            .unwrap_err();
        assert!(
            err.to_string().contains("xdp_prog is endhost's own"),
            "{err}"
        );
        for bad in [
            "net_af_xdp0,iface=eth0,iface=eth1",
            "net_pcap0,iface=eth0",
            "net_af_xdp,iface=eth0",
            "net_af_packet0,iface",
            "net_memif0,socket=relative.sock",
            "net_memif0,socket=/a,b",
            "net_af_packet0,qpairs=four",
        ] {
            assert!(bad.parse::<Vdev>().is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn the_program_is_added_only_with_a_safe_path() {
        let vdev: Vdev = "net_af_xdp0,iface=eth0".parse().unwrap();
        assert_eq!(
            vdev.with_program(std::path::Path::new("/tmp/endhost-xdp-Ab3/xdp_redirect.o"))
                .unwrap(),
            "net_af_xdp0,iface=eth0,xdp_prog=/tmp/endhost-xdp-Ab3/xdp_redirect.o"
        );
        assert!(
            vdev.with_program(std::path::Path::new("/tmp/a,b=c/x.o"))
                .is_err()
        );
    }
}
