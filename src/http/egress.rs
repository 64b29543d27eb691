//! Outbound requests to addresses steward did not configure itself (`http_fetch`, file
//! URLs found in events): every target is checked before the connection is made.
//!
//! The check runs in two places so there is no window between checking and connecting:
//! IP-literal hosts (including the decimal and hex forms, which URL parsing normalizes
//! to dotted quads) are checked on the URL, and host names are checked inside the DNS
//! resolver the client connects with, so the address that was checked is the address
//! that is dialled. Redirects are checked the same way, hop by hop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Default overall deadline of one request (connect, redirects and body).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Most redirects followed.
pub const MAX_REDIRECTS: usize = 5;

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    #[error("refused URL '{0}': only http and https URLs may be fetched")]
    Scheme(String),
    #[error("refused URL '{0}': URLs with a user name or password are not fetched")]
    Userinfo(String),
    #[error("refused URL '{0}': it has no host")]
    NoHost(String),
    #[error(
        "refused {host}: it is (or resolves to) {addr}, a {class} address; internal addresses are fetched only when the operator lists them in STEWARD_HTTP_ALLOW"
    )]
    Internal {
        host: String,
        addr: IpAddr,
        class: &'static str,
    },
    #[error("outbound fetches are unavailable: the checked HTTP client could not be built ({0})")]
    Unavailable(String),
    #[error("refused: more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
    #[error(
        "invalid STEWARD_HTTP_ALLOW entry '{0}': expected a host name, an IP address or a CIDR like 10.20.0.0/16"
    )]
    BadAllowEntry(String),
}

/// Which internal targets the operator opened: host names (exact, case-insensitive) and
/// address ranges. Empty means every internal address is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    hosts: Vec<String>,
    nets: super::networks::Networks,
}

impl EgressPolicy {
    /// Parses a comma list of hosts, IPs and CIDRs (`127.0.0.1,wiki.corp,10.20.0.0/16`).
    pub fn parse(list: &str) -> Result<EgressPolicy, EgressError> {
        let mut policy = EgressPolicy::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            // An address or a network, else a host name (`10.0.0.0/33` is neither).
            if policy.nets.add(entry) {
                continue;
            }
            if entry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            {
                policy.hosts.push(entry.to_ascii_lowercase());
            } else {
                return Err(EgressError::BadAllowEntry(entry.to_string()));
            }
        }
        Ok(policy)
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    fn addr_allowed(&self, addr: IpAddr) -> bool {
        self.nets.contains(addr)
    }

    /// Checks one address reached through `host`.
    pub fn check_addr(&self, host: &str, addr: IpAddr) -> Result<(), EgressError> {
        match internal_class(addr) {
            Some(class) if !self.host_allowed(host) && !self.addr_allowed(addr) => {
                Err(EgressError::Internal {
                    host: host.to_string(),
                    addr,
                    class,
                })
            }
            _ => Ok(()),
        }
    }

    /// The addresses of `found` (what `host` resolved to) the policy allows; the last
    /// refusal when every one was refused (none found is not a refusal).
    pub fn allowed_addrs(
        &self,
        host: &str,
        found: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, EgressError> {
        let mut refused = None;
        let mut allowed = Vec::new();
        for addr in found {
            match self.check_addr(host, addr.ip()) {
                Ok(()) => allowed.push(addr),
                Err(e) => refused = Some(e),
            }
        }
        match (allowed.is_empty(), refused) {
            (true, Some(e)) => Err(e),
            _ => Ok(allowed),
        }
    }

    /// Checks what can be checked on the URL itself: scheme, userinfo, and IP-literal
    /// hosts. Host names are checked when they are resolved.
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), EgressError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(EgressError::Scheme(url.to_string()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(EgressError::Userinfo(redact_userinfo(url)));
        }
        match url.host() {
            None => Err(EgressError::NoHost(url.to_string())),
            Some(url::Host::Ipv4(ip)) => self.check_addr(&ip.to_string(), IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check_addr(&ip.to_string(), IpAddr::V6(ip)),
            Some(url::Host::Domain(_)) => Ok(()),
        }
    }
}

fn redact_userinfo(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

/// The kind of internal address `addr` is, or `None` for a public one.
pub fn internal_class(addr: IpAddr) -> Option<&'static str> {
    match addr {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => v6_class(v6),
    }
}

fn v4_class(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match (a, b) {
        _ if ip.is_unspecified() || a == 0 => "unspecified",
        _ if ip.is_loopback() => "loopback",
        (10, _) | (192, 168) => "private",
        // Azure's WireServer (the host's agent and metadata; a public-looking address
        // every Azure VM reaches).
        (168, 63) if ip.octets()[2..] == [129, 16] => "cloud host service",
        (172, b) if (16..32).contains(&b) => "private",
        (169, 254) => "link-local",
        (100, b) if (64..128).contains(&b) => "carrier-grade NAT",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() || a >= 240 => "reserved",
        (192, 0) if ip.octets()[2] == 0 => "reserved",
        (198, 18) | (198, 19) => "reserved",
        // 6to4 relay anycast (deprecated).
        (192, 88) if ip.octets()[2] == 99 => "reserved",
        // Documentation (TEST-NET-1, -2, -3): never a real destination, and some hosts
        // use them for themselves.
        (192, 0) if ip.octets()[2] == 2 => "documentation",
        (198, 51) if ip.octets()[2] == 100 => "documentation",
        (203, 0) if ip.octets()[2] == 113 => "documentation",
        _ => return None,
    })
}

fn v6_class(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_class(v4);
    }
    let seg = ip.segments();
    let v4_at = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    // The IPv4 address in the low 32 bits (IPv4-compatible, IPv4-translated, NAT64).
    let low = v4_at(seg[6], seg[7]);
    Some(match seg[0] {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        // ::/8 is reserved; its IPv4-embedding forms (::a.b.c.d, ::ffff:0:a.b.c.d) are
        // judged by their IPv4 address, and refused in any case.
        s if s < 0x0100 => return v4_class(low).or(Some("reserved")),
        // NAT64, well-known (64:ff9b::/96) and local-use (64:ff9b:1::/48) prefixes.
        0x64 if seg[1] == 0xff9b => return v4_class(low).or((seg[2] != 0).then_some("private")),
        // 6to4: 2002:a.b.c.d::/48 reaches a.b.c.d's network.
        0x2002 => return v4_class(v4_at(seg[1], seg[2])),
        // Teredo (2001::/32) tunnels to an IPv4 host through a relay: never needed.
        0x2001 if seg[1] == 0 => "Teredo",
        0x2001 if seg[1] == 0x0db8 => "documentation",
        s if s & 0xfe00 == 0xfc00 => "private",
        s if s & 0xffc0 == 0xfe80 => "link-local",
        s if s & 0xffc0 == 0xfec0 => "site-local",
        s if s & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    })
}

/// Resolves with the system resolver, then keeps only permitted addresses.
struct CheckedResolver {
    policy: Arc<EgressPolicy>,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            match policy.allowed_addrs(&host, found) {
                Ok(allowed) => Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs),
                Err(e) => Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>),
            }
        })
    }
}

/// A client for untrusted URLs, with the policy it enforces. The client is built on
/// first use and shared by clones: building one loads the system's root certificates
/// (about 6 ms of CPU), which a default `Egress` that is never used should not pay.
#[derive(Clone)]
pub struct Egress {
    /// `Err` when the client could not be built: requests then fail, never unchecked.
    client: Arc<std::sync::OnceLock<Result<reqwest::Client, String>>>,
    policy: Arc<EgressPolicy>,
    timeout: Duration,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress").field("policy", &self.policy).finish()
    }
}

impl Default for Egress {
    /// Refuses every internal address.
    fn default() -> Self {
        Egress::new(EgressPolicy::default())
    }
}

impl Egress {
    /// A client enforcing `policy`, with the default request deadline.
    pub fn new(policy: EgressPolicy) -> Egress {
        Egress::with_timeout(policy, DEFAULT_TIMEOUT)
    }

    pub fn with_timeout(policy: EgressPolicy, timeout: Duration) -> Egress {
        Egress {
            client: Arc::default(),
            policy: Arc::new(policy),
            timeout,
        }
    }

    /// The checked client, built the first time it is needed.
    fn client(&self) -> &Result<reqwest::Client, String> {
        self.client.get_or_init(|| {
            super::install_crypto_provider();
            let policy = self.policy.clone();
            let on_redirect = policy.clone();
            let builder = reqwest::Client::builder()
                .user_agent(concat!("steward/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(Duration::from_secs(10))
                .timeout(self.timeout)
                .no_proxy()
                .dns_resolver(Arc::new(CheckedResolver { policy }))
                .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                    if attempt.previous().len() > MAX_REDIRECTS {
                        return attempt.error(EgressError::TooManyRedirects);
                    }
                    match on_redirect.check_url(attempt.url()) {
                        Ok(()) => attempt.follow(),
                        Err(e) => attempt.error(e),
                    }
                }));
            // Building fails only when the TLS backend cannot initialise; every request
            // then fails with the reason instead of going out unchecked.
            builder.build().map_err(|e| {
                tracing::error!(error = %e, "cannot build the egress client; outbound fetches will fail");
                e.to_string()
            })
        })
    }

    /// The policy in effect.
    pub fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    /// A GET request for `url` after the URL checks (scheme, userinfo, literal
    /// addresses); host names are checked as they resolve.
    pub fn get(&self, url: &str) -> Result<reqwest::RequestBuilder, EgressError> {
        let parsed = reqwest::Url::parse(url).map_err(|_| EgressError::NoHost(url.to_string()))?;
        self.policy.check_url(&parsed)?;
        let client = self
            .client()
            .as_ref()
            .map_err(|e| EgressError::Unavailable(e.clone()))?;
        Ok(client.get(parsed))
    }
}

/// The most specific reason in an error chain: the egress refusal when there is one.
pub fn refusal(err: &(dyn std::error::Error + 'static)) -> Option<EgressError> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(found) = e.downcast_ref::<EgressError>() {
            return Some(found.clone());
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn literal_internal_addresses_are_refused_in_every_spelling() {
        let p = EgressPolicy::default();
        for u in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://0.0.0.0/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.1.2.3/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://168.63.129.16/?comp=versions",
            "http://100.64.0.1/",
            "http://224.0.0.1/",
            "http://[::1]/",
            "http://[::]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
            "http://[ff02::1]/",
            "http://[64:ff9b::a00:1]/",
            "http://192.0.2.10/",
            "http://198.51.100.7/",
            "http://203.0.113.1/",
            "http://[2002:7f00:1::]/",
            "http://[2002:a00:1::1]/",
            "http://[::ffff:0:7f00:1]/",
            "http://[::7f00:1]/",
            "http://[64:ff9b:1::a00:1]/",
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
            "http://[2001:db8::1]/",
        ] {
            assert!(
                matches!(p.check_url(&url(u)), Err(EgressError::Internal { .. })),
                "{u} was not refused"
            );
        }
        assert!(p.check_url(&url("https://93.184.215.14/")).is_ok());
        assert!(p.check_url(&url("https://[2606:4700::1111]/")).is_ok());
        // 6to4 of a public IPv4 address is public.
        assert!(p.check_url(&url("https://[2002:5db8:d70e::1]/")).is_ok());
        assert!(p.check_url(&url("https://example.com/")).is_ok());
    }

    #[test]
    fn userinfo_and_schemes_are_refused() {
        let p = EgressPolicy::default();
        assert!(matches!(
            p.check_url(&url("https://user:pw@example.com/")),
            Err(EgressError::Userinfo(u)) if !u.contains("pw")
        ));
        assert!(matches!(
            p.check_url(&url("file:///etc/passwd")),
            Err(EgressError::Scheme(_))
        ));
    }

    #[test]
    fn the_allowlist_opens_named_hosts_and_ranges() {
        let p = EgressPolicy::parse("127.0.0.1, wiki.corp ,10.20.0.0/16,fd00::/8").unwrap();
        assert!(p.check_url(&url("http://127.0.0.1:9/")).is_ok());
        assert!(p.check_url(&url("http://[::ffff:127.0.0.1]/")).is_ok());
        assert!(p.check_url(&url("http://127.0.0.2/")).is_err());
        assert!(p.check_url(&url("http://10.20.9.9/")).is_ok());
        assert!(p.check_url(&url("http://10.21.0.1/")).is_err());
        assert!(p.check_url(&url("http://[fd12::1]/")).is_ok());
        assert!(p.check_addr("wiki.corp", "10.0.0.5".parse().unwrap()).is_ok());
        assert!(p.check_addr("WIKI.corp.", "10.0.0.5".parse().unwrap()).is_ok());
        assert!(p.check_addr("other.corp", "10.0.0.5".parse().unwrap()).is_err());
        assert!(EgressPolicy::parse("10.0.0.0/33").is_err());
        assert!(EgressPolicy::parse("http://x").is_err());
    }
}
