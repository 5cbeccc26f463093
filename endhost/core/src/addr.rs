//! Link-layer and bus addresses, parsed strictly.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An Ethernet MAC address, written `aa:bb:cc:dd:ee:ff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

/// A malformed address, with what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrParseError {
    pub input: String,
    pub expected: &'static str,
}

impl fmt::Display for AddrParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not {}", self.input, self.expected)
    }
}

impl std::error::Error for AddrParseError {}

impl MacAddr {
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl FromStr for MacAddr {
    type Err = AddrParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || AddrParseError {
            input: s.to_string(),
            expected: "a MAC address (six hex pairs such as 02:00:0a:01:01:0b)",
        };
        let mut bytes = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut bytes {
            let part = parts.next().ok_or_else(err)?;
            if part.len() != 2 {
                return Err(err());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| err())?;
        }
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(MacAddr(bytes))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// A PCI address in domain:bus:device.function form, `0000:3b:00.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddr {
    pub domain: u16,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl FromStr for PciAddr {
    type Err = AddrParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || AddrParseError {
            input: s.to_string(),
            expected: "a PCI address (domain:bus:device.function such as 0000:3b:00.0)",
        };
        let hex = |part: &str, digits: usize| {
            if part.len() == digits && part.bytes().all(|b| b.is_ascii_hexdigit()) {
                u32::from_str_radix(part, 16).map_err(|_| err())
            } else {
                Err(err())
            }
        };
        let (domain, rest) = s.split_once(':').ok_or_else(err)?;
        let (bus, rest) = rest.split_once(':').ok_or_else(err)?;
        let (device, function) = rest.split_once('.').ok_or_else(err)?;
        let device = hex(device, 2)?;
        let function = hex(function, 1)?;
        // PCI allows 32 devices with 8 functions each.
        if device > 0x1f || function > 7 {
            return Err(err());
        }
        Ok(PciAddr {
            domain: hex(domain, 4)? as u16,
            bus: hex(bus, 2)? as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

macro_rules! serde_via_string {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

serde_via_string!(MacAddr);
serde_via_string!(PciAddr);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parses_and_prints_lowercase() {
        let mac: MacAddr = "02:AA:0a:01:01:0B".parse().unwrap();
        assert_eq!(mac.0, [0x02, 0xaa, 0x0a, 0x01, 0x01, 0x0b]);
        assert_eq!(mac.to_string(), "02:aa:0a:01:01:0b");
        assert!(!mac.is_multicast());
        assert!(
            "01:00:5e:00:00:01"
                .parse::<MacAddr>()
                .unwrap()
                .is_multicast()
        );
    }

    #[test]
    fn malformed_macs_are_rejected() {
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "02:00:00:00:00:0g",
            "2:00:00:00:00:00",
            "02-00-00-00-00-00",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn pci_parses_and_prints() {
        let pci: PciAddr = "0000:3b:00.1".parse().unwrap();
        assert_eq!(
            (pci.domain, pci.bus, pci.device, pci.function),
            (0, 0x3b, 0, 1)
        );
        assert_eq!(pci.to_string(), "0000:3b:00.1");
        for bad in [
            "3b:00.0",
            "0000:3b:00",
            "0000:3b:20.0",
            "0000:3b:00.8",
            "0000:zz:00.0",
        ] {
            assert!(bad.parse::<PciAddr>().is_err(), "{bad} was accepted");
        }
    }
}
