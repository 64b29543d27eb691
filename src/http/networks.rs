//! A list of IP networks (`10.0.0.0/8`, `127.0.0.1`, `fd00::/8`), for settings that
//! name the addresses steward trusts (the proxies that may set the trusted user header).

use std::net::IpAddr;

/// Networks, each an address and a prefix length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Networks(Vec<(IpAddr, u8)>);

impl Networks {
    /// Parses a list separated by commas or spaces; each entry is an address (one host)
    /// or `address/prefix`. `Err` names the first entry that is neither.
    pub fn parse(text: &str) -> Result<Networks, String> {
        let mut out = Networks::default();
        for entry in text.split([',', ' ']).map(str::trim).filter(|e| !e.is_empty()) {
            if !out.add(entry) {
                return Err(entry.to_string());
            }
        }
        Ok(out)
    }

    /// Adds one entry, an address or `address/prefix`; `false` (nothing added) when it
    /// is neither.
    pub fn add(&mut self, entry: &str) -> bool {
        let (addr, len) = match entry.split_once('/') {
            Some((addr, len)) => (addr, Some(len)),
            None => (entry, None),
        };
        let Ok(addr) = addr.parse::<IpAddr>() else {
            return false;
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let Some(len) = (match len {
            None => Some(max),
            Some(len) => len.parse::<u8>().ok().filter(|l| *l <= max),
        }) else {
            return false;
        };
        // An IPv4-mapped entry (`::ffff:10.0.0.0/104`) is kept as the IPv4 network it
        // names, its prefix counted from the IPv4 part; one shorter than the mapping
        // prefix is not an IPv4 network.
        let canonical = addr.to_canonical();
        let len = match (addr, canonical) {
            (IpAddr::V6(_), IpAddr::V4(_)) => match len.checked_sub(96) {
                Some(len) => len,
                None => return false,
            },
            _ => len,
        };
        self.0.push((canonical, len));
        true
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ip` (an IPv4-mapped IPv6 address counts as its IPv4 address) is in one
    /// of the networks.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|&(net, len)| match (net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(&net.octets(), &ip.octets(), len),
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix_eq(&net.octets(), &ip.octets(), len),
            _ => false,
        })
    }
}

/// Whether the first `len` bits of `a` and `b` are the same.
fn prefix_eq(a: &[u8], b: &[u8], len: u8) -> bool {
    let len = len.min(u8::try_from(8 * a.len().min(b.len())).unwrap_or(u8::MAX));
    let (whole, rest) = (usize::from(len / 8), len % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xFFu8 << (8 - rest);
    (a[whole] & mask) == (b[whole] & mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_prefixes() {
        let n = Networks::parse("10.0.0.0/8, 127.0.0.1 fd00::/8,192.168.1.128/25").unwrap();
        for yes in [
            "10.1.2.3",
            "127.0.0.1",
            "::ffff:10.9.9.9",
            "fd12::1",
            "192.168.1.200",
        ] {
            assert!(n.contains(yes.parse().unwrap()), "{yes}");
        }
        for no in ["11.0.0.1", "127.0.0.2", "fe80::1", "192.168.1.127", "::1"] {
            assert!(!n.contains(no.parse().unwrap()), "{no}");
        }
        assert!(
            Networks::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        assert_eq!(Networks::parse("10.0.0.0/33"), Err("10.0.0.0/33".into()));
        assert_eq!(Networks::parse("proxy.local"), Err("proxy.local".into()));
        assert!(Networks::parse("").unwrap().is_empty());
        // IPv4-mapped entries name IPv4 networks.
        let mapped = Networks::parse("::ffff:10.0.0.5, ::ffff:192.168.0.0/112").unwrap();
        assert!(mapped.contains("10.0.0.5".parse().unwrap()));
        assert!(mapped.contains("192.168.7.9".parse().unwrap()));
        assert!(!mapped.contains("10.0.0.6".parse().unwrap()));
        assert!(!mapped.contains("192.169.0.1".parse().unwrap()));
        assert_eq!(
            Networks::parse("::ffff:0.0.0.0/8"),
            Err("::ffff:0.0.0.0/8".into())
        );
    }
}
