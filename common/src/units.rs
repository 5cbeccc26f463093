//! Rates, sizes and durations as people write them: one parser and one printer each,
//! for the inventory, every command line, the benches and the lab. What a printer
//! writes, the parser reads back.
//!
//! - [`Rate`]: `100G`, `25Gbps`, `1gbit`, `400 Mbit/s`, `1.5G`, `1000M`; a bare number
//!   is Mbit/s. Whole Mbit/s only. Printed `100 Gbit/s`, `1.5 Gbit/s`, `400 Mbit/s`.
//! - [`Size`]: `64MiB`, `4 KiB`, `1GiB`, `64MB`, `512B`; a bare number is bytes.
//!   Printed in the largest unit that divides it (binary first): `64 MiB`, `64 MB`.
//! - [`Duration`]: `30s`, `500ms`, `125us` (or `µs`), `2m`, `1.5ms`; a bare number is
//!   seconds. Whole nanoseconds. Printed `30 s`, `1.5 ms`, `125 µs`.

use std::fmt;
use std::str::FromStr;

/// Why a rate, size or duration was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not {what} (write it like {examples})")]
pub struct UnitError {
    text: String,
    what: &'static str,
    examples: &'static str,
}

/// `text` split into its number and its unit (lower case, without spaces).
fn split(text: &str) -> (&str, String) {
    let text = text.trim();
    let at = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let unit: String = text[at..]
        .chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect();
    (&text[..at], unit)
}

/// `number` × `scale` as a whole number, if it is one (decimals allowed where the
/// product is whole).
fn scaled(number: &str, scale: u64) -> Option<u64> {
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return None;
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if fraction.contains('.') {
        return None;
    }
    let digits = u32::try_from(fraction.len()).ok()?;
    let denominator = 10u64.checked_pow(digits)?;
    let value: u64 = format!("{whole}{fraction}").parse().ok()?;
    let product = u128::from(value) * u128::from(scale);
    (product % u128::from(denominator) == 0)
        .then(|| u64::try_from(product / u128::from(denominator)).ok())
        .flatten()
}

/// Prints `value` in `unit` of `size`, with up to three decimals, trailing zeros cut.
fn decimal(value: u64, size: u64) -> String {
    let whole = value / size;
    let rest = value % size;
    if rest == 0 {
        return whole.to_string();
    }
    let thousandths = (u128::from(rest) * 1000 / u128::from(size)) as u64;
    let text = format!("{whole}.{thousandths:03}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A link's rate, in whole Mbit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    pub fn from_mbps(mbps: u64) -> Rate {
        Rate(mbps)
    }

    pub fn mbps(self) -> u64 {
        self.0
    }

    pub fn bits_per_second(self) -> u64 {
        self.0.saturating_mul(1_000_000)
    }
}

impl FromStr for Rate {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Rate, UnitError> {
        let error = || UnitError {
            text: text.to_string(),
            what: "a rate",
            examples: "100G, 25Gbps, 1gbit, 400M",
        };
        let (number, unit) = split(text);
        let unit = unit.strip_suffix("/s").unwrap_or(&unit);
        let prefix = unit
            .strip_suffix("bps")
            .or_else(|| unit.strip_suffix("bit"))
            .unwrap_or(unit);
        let scale = match prefix {
            "" | "m" => 1,
            "g" => 1_000,
            "t" => 1_000_000,
            _ => return Err(error()),
        };
        match scaled(number, scale) {
            Some(mbps) if mbps > 0 => Ok(Rate(mbps)),
            _ => Err(error()),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            mbps if mbps >= 1_000_000 => write!(f, "{} Tbit/s", decimal(mbps, 1_000_000)),
            mbps if mbps >= 1_000 => write!(f, "{} Gbit/s", decimal(mbps, 1_000)),
            mbps => write!(f, "{mbps} Mbit/s"),
        }
    }
}

/// An amount of memory or data, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(u64);

const SIZE_UNITS: [(&str, u64); 8] = [
    ("tib", 1 << 40),
    ("gib", 1 << 30),
    ("mib", 1 << 20),
    ("kib", 1 << 10),
    ("tb", 1_000_000_000_000),
    ("gb", 1_000_000_000),
    ("mb", 1_000_000),
    ("kb", 1_000),
];

impl Size {
    pub fn from_bytes(bytes: u64) -> Size {
        Size(bytes)
    }

    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for Size {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Size, UnitError> {
        let error = || UnitError {
            text: text.to_string(),
            what: "a size",
            examples: "64MiB, 4KiB, 1GiB or 64MB",
        };
        let (number, unit) = split(text);
        let scale = match unit.as_str() {
            "" | "b" => 1,
            unit => SIZE_UNITS
                .iter()
                .find(|(name, _)| *name == unit)
                .map(|(_, scale)| *scale)
                .ok_or_else(error)?,
        };
        scaled(number, scale).map(Size).ok_or_else(error)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = ["TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "kB"];
        let exact = SIZE_UNITS
            .iter()
            .zip(names)
            .find(|((_, scale), _)| self.0 >= *scale && self.0.is_multiple_of(*scale));
        match exact {
            Some(((_, scale), name)) => write!(f, "{} {name}", self.0 / scale),
            None => write!(f, "{} B", self.0),
        }
    }
}

/// A span of time, in whole nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Duration {
    pub fn from_nanos(ns: u64) -> Duration {
        Duration(ns)
    }

    pub fn from_secs(s: u64) -> Duration {
        Duration(s.saturating_mul(1_000_000_000))
    }

    pub fn nanos(self) -> u64 {
        self.0
    }

    pub fn std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Duration {
        Duration(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl FromStr for Duration {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Duration, UnitError> {
        let error = || UnitError {
            text: text.to_string(),
            what: "a duration",
            examples: "30s, 500ms, 125us or 2m",
        };
        let (number, unit) = split(text);
        let scale = match unit.as_str() {
            "" | "s" => 1_000_000_000,
            "ms" => 1_000_000,
            "us" | "µs" => 1_000,
            "ns" => 1,
            "m" | "min" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(error()),
        };
        scaled(number, scale).map(Duration).ok_or_else(error)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ns if ns >= 1_000_000_000 => write!(f, "{} s", decimal(ns, 1_000_000_000)),
            ns if ns >= 1_000_000 => write!(f, "{} ms", decimal(ns, 1_000_000)),
            ns if ns >= 1_000 => write!(f, "{} µs", decimal(ns, 1_000)),
            ns => write!(f, "{ns} ns"),
        }
    }
}

/// [`Size`] in bytes: a command-line value parser.
pub fn bytes(text: &str) -> Result<u64, UnitError> {
    text.parse::<Size>().map(Size::bytes)
}

/// [`Rate`] in Mbit/s: a command-line value parser.
pub fn mbps(text: &str) -> Result<u64, UnitError> {
    text.parse::<Rate>().map(Rate::mbps)
}

/// [`Duration`] in whole seconds (a bare number is seconds): a command-line value
/// parser for timeouts.
pub fn seconds(text: &str) -> Result<u64, UnitError> {
    let duration = text.parse::<Duration>()?;
    if !duration.0.is_multiple_of(1_000_000_000) {
        return Err(UnitError {
            text: text.to_string(),
            what: "a whole number of seconds",
            examples: "30, 30s or 2m",
        });
    }
    Ok(duration.0 / 1_000_000_000)
}

/// [`seconds`], at least one: a value parser for timeouts that cannot be zero.
pub fn positive_seconds(text: &str) -> Result<u64, UnitError> {
    match seconds(text)? {
        0 => Err(UnitError {
            text: text.to_string(),
            what: "a timeout of at least a second",
            examples: "30, 30s or 2m",
        }),
        seconds => Ok(seconds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_every_spelling_in_use() {
        for (text, mbps) in [
            ("100G", 100_000),
            ("25Gbps", 25_000),
            ("400g", 400_000),
            ("1000M", 1000),
            ("10000", 10_000),
            ("1gbit", 1000),
            ("100mbit", 100),
            ("1.5G", 1500),
            ("400 Mbit/s", 400),
            ("1 Gbit/s", 1000),
        ] {
            assert_eq!(text.parse::<Rate>(), Ok(Rate(mbps)), "{text}");
        }
        for bad in ["", "G", "fast", "0G", "-1G", "1.0005G", "1..5G", "5kbit"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn sizes_in_every_spelling_in_use() {
        for (text, bytes) in [
            ("64MiB", 64 << 20),
            ("64MB", 64_000_000),
            ("4096", 4096),
            ("4 KiB", 4096),
            ("1GiB", 1 << 30),
            ("512B", 512),
            ("1.5KiB", 1536),
            ("0", 0),
        ] {
            assert_eq!(text.parse::<Size>(), Ok(Size(bytes)), "{text}");
        }
        for bad in ["", "MiB", "64XB", "1.3B", "99999999999999TiB"] {
            assert!(bad.parse::<Size>().is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn durations_in_every_spelling_in_use() {
        for (text, ns) in [
            ("30s", 30_000_000_000),
            ("30", 30_000_000_000),
            ("500ms", 500_000_000),
            ("125us", 125_000),
            ("125 µs", 125_000),
            ("1.5ms", 1_500_000),
            ("2m", 120_000_000_000),
        ] {
            assert_eq!(text.parse::<Duration>(), Ok(Duration(ns)), "{text}");
        }
        for bad in ["", "s", "3 weeks", "0.1ns"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn command_line_values_in_their_units() {
        assert_eq!(bytes("64MiB"), Ok(64 << 20));
        assert_eq!(mbps("1gbit"), Ok(1000));
        assert_eq!(seconds("60"), Ok(60));
        assert_eq!(seconds("2m"), Ok(120));
        assert!(seconds("1.5s").is_err());
        assert_eq!(positive_seconds("1"), Ok(1));
        assert!(positive_seconds("0").is_err());
    }

    /// What the printer writes, the parser reads back to the same value.
    #[test]
    fn what_is_printed_reads_back() {
        for mbps in [1, 400, 1000, 1500, 25_000, 100_000, 400_000, 1_600_000] {
            let rate = Rate(mbps);
            assert_eq!(rate.to_string().parse::<Rate>(), Ok(rate), "{rate}");
        }
        assert_eq!(Rate(1500).to_string(), "1.5 Gbit/s");
        for bytes in [0, 1, 512, 1024, 1536, 64 << 20, 64_000_000, (1 << 40) * 3] {
            let size = Size(bytes);
            assert_eq!(size.to_string().parse::<Size>(), Ok(size), "{size}");
        }
        assert_eq!(Size(64 << 20).to_string(), "64 MiB");
        for ns in [1, 125_000, 1_500_000, 30_000_000_000, 12_500] {
            let duration = Duration(ns);
            assert_eq!(
                duration.to_string().parse::<Duration>(),
                Ok(duration),
                "{duration}"
            );
        }
        assert_eq!(Duration(125_000).to_string(), "125 µs");
    }
}
