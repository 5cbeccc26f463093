//! The checks every section uses: reporting, numbers and addresses in their ranges,
//! and addresses and MACs claimed by one owner each.

use super::*;

impl Validator<'_> {
    pub(super) fn error(&mut self, span: &Span, message: impl Into<String>) {
        self.report.error(span, message);
    }

    /// Records that the entry named `name` is unusable.
    pub(super) fn fail(&mut self, kind: &'static str, name: &str) {
        self.failed.insert(kind);
        self.broken.insert(name.to_string());
    }

    /// True when some entry of one of `kinds` failed, so a check over all of them would
    /// only report consequences of that failure.
    pub(super) fn any_failed(&self, kinds: &[&str]) -> bool {
        kinds.iter().any(|k| self.failed.contains(k))
    }

    pub(super) fn parse<T: FromStr>(&mut self, text: &Spanned<String>) -> Option<T>
    where
        T::Err: Display,
    {
        match text.parse::<T>() {
            Ok(value) => Some(value),
            Err(e) => {
                self.error(text.span(), e.to_string());
                None
            }
        }
    }

    pub(super) fn ipv4(&mut self, text: &Spanned<String>) -> Option<Ipv4Addr> {
        match text.parse::<Ipv4Addr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                self.error(text.span(), format!("`{}` is not an IPv4 address", **text));
                None
            }
        }
    }

    /// A prefix written without host bits, such as a subnet or a pool.
    pub(super) fn network(&mut self, text: &Spanned<String>) -> Option<Ipv4Net> {
        let Ok(net) = text.parse::<Ipv4Net>() else {
            self.error(
                text.span(),
                format!("`{}` is not an IPv4 prefix (such as 10.1.1.0/24)", **text),
            );
            return None;
        };
        if net.trunc() != net {
            self.error(
                text.span(),
                format!(
                    "`{}` has host bits set; did you mean {}?",
                    **text,
                    net.trunc()
                ),
            );
            return None;
        }
        Some(net)
    }

    pub(super) fn int<T: TryFrom<u64>>(
        &mut self,
        value: &Spanned<u64>,
        field: &str,
        range: RangeInclusive<u64>,
    ) -> Option<T> {
        if range.contains(value) {
            T::try_from(**value).ok()
        } else {
            let (lo, hi) = (range.start(), range.end());
            self.error(
                value.span(),
                format!("`{field}` must be between {lo} and {hi}"),
            );
            None
        }
    }

    pub(super) fn int_or<T: TryFrom<u64>>(
        &mut self,
        value: &Option<Spanned<u64>>,
        field: &str,
        range: RangeInclusive<u64>,
        default: T,
    ) -> Option<T> {
        match value {
            Some(v) => self.int(v, field, range),
            None => Some(default),
        }
    }

    pub(super) fn float_or(
        &mut self,
        value: &Option<Spanned<f64>>,
        field: &str,
        ok: fn(f64) -> bool,
        expectation: &str,
        default: f64,
    ) -> Option<f64> {
        match value {
            Some(v) if ok(**v) => Some(**v),
            Some(v) => {
                self.error(v.span(), format!("`{field}` must be {expectation}"));
                None
            }
            None => Some(default),
        }
    }

    /// Claims `key` for `owner`; a second claim is reported where it is made.
    pub(super) fn claim<K: Hash + Eq + Copy + Display>(
        &mut self,
        key: K,
        owner: &str,
        span: &Span,
        what: &str,
        table: fn(&mut Self) -> &mut HashMap<K, (String, usize)>,
    ) {
        let line = start_of(span).line();
        match table(self).get(&key) {
            Some((first, first_line)) => {
                let message =
                    format!("{what} {key} is already used by {first} (line {first_line})");
                self.error(span, message);
            }
            None => {
                table(self).insert(key, (owner.to_string(), line));
            }
        }
    }

    pub(super) fn claim_ip(&mut self, ip: Ipv4Addr, owner: &str, span: &Span) {
        self.claim(ip, owner, span, "IP address", |v| &mut v.ips);
    }

    pub(super) fn claim_mac(&mut self, mac: MacAddr, owner: &str, span: &Span) {
        if mac.is_multicast() {
            self.error(span, format!("MAC address {mac} is a multicast address"));
        }
        self.claim(mac, owner, span, "MAC address", |v| &mut v.macs);
    }
}

/// True when `ip` lies in `subnet` and is neither its network nor broadcast address.
pub(super) fn is_host_address(subnet: Ipv4Net, ip: Ipv4Addr) -> bool {
    subnet.contains(&ip)
        && (subnet.prefix_len() >= 31 || (ip != subnet.network() && ip != subnet.broadcast()))
}

/// An IPv4 or IPv6 address, or a DNS host name (RFC 1123 labels).
pub(super) fn is_mgmt_address(address: &str) -> bool {
    if address.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    (1..=253).contains(&address.len())
        && address.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A POSIX-portable user name, as `useradd` takes it.
pub(super) fn is_user_name(user: &str) -> bool {
    (1..=32).contains(&user.len())
        && !user.starts_with(['-', '.'])
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

pub(super) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether two prefixes share an address.
pub(super) fn overlaps(a: Ipv4Net, b: Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}
