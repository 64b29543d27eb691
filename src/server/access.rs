//! Who may read the run inspector and `/metrics`.
//!
//! The inspector shows what agents did, so it is closed unless one of these admits the
//! request:
//! - `STEWARD_ADMIN_TOKEN`, as `Authorization: Bearer <token>` or as the login cookie
//!   `/login` sets after the token is typed into its form (the cookie holds a
//!   domain-separated SHA-256 of the token, never the token);
//! - `STEWARD_TRUSTED_USER_HEADER`, a header an authenticating proxy (oauth2-proxy's
//!   `X-Forwarded-User`) sets on every request it lets through, taken only from the
//!   proxy's addresses (`STEWARD_TRUSTED_PROXIES`);
//! - neither configured, steward bound to a loopback address and `STEWARD_PUBLIC_URL`
//!   naming no other host: only people on the machine can connect, so the inspector is
//!   open, to requests that did not come through a proxy (a proxy on the same machine
//!   connects from loopback too; the forwarding headers it adds give it away).
//!
//! `/metrics` takes `STEWARD_METRICS_TOKEN` as a bearer token (Prometheus's
//! `authorization` setting); with none set it is open only as the inspector is (and to
//! this steward's own host names, against DNS rebinding), and closed everywhere else.

use crate::triggers::auth::token_eq;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE};

/// The login cookie's name over plain HTTP.
pub const COOKIE_NAME: &str = "steward_admin";

/// The login cookie's name over HTTPS: a `__Host-` cookie is only set by and sent to
/// this origin (host, scheme and port alike), never to another service on the host.
pub const SECURE_COOKIE_NAME: &str = "__Host-steward_admin";

/// How the admin surfaces authenticate.
#[derive(Clone, Default)]
pub struct AdminAccess {
    /// `STEWARD_ADMIN_TOKEN`.
    pub token: Option<String>,
    /// `STEWARD_TRUSTED_USER_HEADER`, lower-cased.
    pub trusted_user_header: Option<String>,
    /// `STEWARD_TRUSTED_PROXIES`: the header is taken only from these peers.
    pub trusted_proxies: crate::http::networks::Networks,
    /// `STEWARD_METRICS_TOKEN`.
    pub metrics_token: Option<String>,
    /// Admit unauthenticated inspector requests: set by `serve` only when neither the
    /// token nor the header is configured and the bind address is loopback.
    pub open: bool,
    /// Admit `/metrics` requests without a token: set by `serve` only when
    /// `STEWARD_METRICS_TOKEN` is unset and the bind address is loopback.
    pub metrics_open: bool,
    /// Mark the login cookie `Secure` (set when `STEWARD_PUBLIC_URL` is https).
    pub secure_cookie: bool,
    /// The `Host` names the inspector answers to (see [`AdminAccess::host_allowed`]).
    pub hosts: Hosts,
    /// Failed sign-ins (typed tokens and bearer tokens) per client address.
    pub throttle: std::sync::Arc<super::throttle::LoginThrottle>,
    /// Wrong `STEWARD_METRICS_TOKEN`s per client address, kept apart so failed
    /// sign-ins never hold back Prometheus behind the same address.
    pub metrics_throttle: std::sync::Arc<super::throttle::LoginThrottle>,
}

/// The `Host` values the inspector answers to, against DNS rebinding: a page on
/// `attacker.example` whose name is made to resolve to 127.0.0.1 sends
/// `Host: attacker.example`, which is refused.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    /// The address `serve` listens on: an IP literal `Host` must be it, or a loopback
    /// address (any IP literal when listening on every address).
    pub bind: Option<std::net::IpAddr>,
    /// `STEWARD_PUBLIC_URL`'s host, lower-cased.
    pub public: Option<String>,
}

impl Hosts {
    /// Whether `host` (a `Host` header value, port and all) names this steward.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let name = match host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or_default().to_string(),
            None => match host.rsplit_once(':') {
                Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name.to_string(),
                _ => host.clone(),
            },
        };
        let name = name.trim_end_matches('.');
        if name == "localhost" || self.public.as_deref() == Some(name) {
            return true;
        }
        // An IP literal cannot be a rebound name: the browser's origin is that address.
        match name.parse::<std::net::IpAddr>() {
            Ok(ip) => {
                ip.is_loopback()
                    || match self.bind {
                        Some(bind) => bind.is_unspecified() || bind == ip,
                        None => true,
                    }
            }
            Err(_) => false,
        }
    }
}

/// How long a login lasts: the expiry is inside the signed cookie value, so a copied
/// cookie stops working then whatever the browser does.
const SESSION_SECS: i64 = 12 * 3600;

impl std::fmt::Debug for AdminAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminAccess")
            .field("token", &self.token.is_some())
            .field("trusted_user_header", &self.trusted_user_header)
            .field("metrics_token", &self.metrics_token.is_some())
            .field("open", &self.open)
            .field("metrics_open", &self.metrics_open)
            .finish()
    }
}

/// Who is looking at the inspector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewer {
    /// Named by the authenticating proxy.
    Person(String),
    /// Holds the admin token.
    Admin,
    /// On loopback with no authentication configured.
    Local,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error(
        "this request came through a proxy, and without STEWARD_ADMIN_TOKEN or STEWARD_TRUSTED_USER_HEADER the run inspector answers only on this machine"
    )]
    Proxied,
    #[error("sign in with STEWARD_ADMIN_TOKEN at /login, or send it as a bearer token")]
    NeedsToken,
    #[error(
        "the run inspector is closed: steward listens on a non-loopback address and neither STEWARD_ADMIN_TOKEN nor STEWARD_TRUSTED_USER_HEADER is set"
    )]
    Closed,
}

impl AdminAccess {
    /// Whether `serve` may open the inspector without authentication on this bind.
    pub fn configured(&self) -> bool {
        self.token.is_some() || self.trusted_user_header.is_some()
    }

    /// Admits or refuses an inspector request from `peer` (the connection's address).
    pub fn viewer(&self, headers: &HeaderMap, peer: Option<std::net::IpAddr>) -> Result<Viewer, Denied> {
        if let Some(name) = &self.trusted_user_header
            && peer.is_some_and(|ip| self.trusted_proxies.contains(ip))
        {
            // A proxy that appends the header rather than replacing it would pass on a
            // value the client sent first: more than one is no person.
            let mut given = headers.get_all(name.as_str()).iter();
            if let (Some(user), None) = (given.next().and_then(|v| v.to_str().ok()), given.next())
                && !user.trim().is_empty()
            {
                return Ok(Viewer::Person(user.trim().to_string()));
            }
        }
        if let Some(token) = &self.token {
            if bearer(headers).is_some_and(|b| token_eq(b.as_bytes(), token.as_bytes())) {
                return Ok(Viewer::Admin);
            }
            if cookie(headers, self.cookie_name())
                .is_some_and(|c| valid_session(token, c, chrono::Utc::now().timestamp()))
            {
                return Ok(Viewer::Admin);
            }
            return Err(Denied::NeedsToken);
        }
        if self.trusted_user_header.is_some() {
            return Err(Denied::NeedsToken);
        }
        match (self.open, proxied(headers)) {
            (true, false) => Ok(Viewer::Local),
            (true, true) => Err(Denied::Proxied),
            (false, _) => Err(Denied::Closed),
        }
    }

    /// `Err(host)` when the request's `Host` is not one this steward answers to as the
    /// inspector. A request without `Host` (not a browser's) passes.
    pub fn host_allowed(&self, headers: &HeaderMap) -> Result<(), String> {
        match headers.get(axum::http::header::HOST).map(|h| h.to_str()) {
            None => Ok(()),
            Some(Ok(host)) if self.hosts.allows(host) => Ok(()),
            Some(Ok(host)) => Err(host.to_string()),
            Some(Err(_)) => Err("(not text)".into()),
        }
    }

    /// Whether a request that may change something (not `GET` or `HEAD`) comes from a
    /// page of this steward: a browser names the page's origin in `Origin`, which must be
    /// the host the request is for; a page of another site (which may post to
    /// `http://127.0.0.1:8080/mcp` from a browser on the same machine) is refused. No
    /// `Origin` (a program, not a browser) passes; so does `STEWARD_PUBLIC_URL`'s host,
    /// which a proxy in front of steward may not pass on as `Host`. The origin refused
    /// is the error.
    pub fn origin_allowed(&self, headers: &HeaderMap) -> Result<(), String> {
        let Some(origin) = headers.get(axum::http::header::ORIGIN) else {
            return Ok(());
        };
        let origin = origin.to_str().unwrap_or("(not text)").to_string();
        let Some(url) = url::Url::parse(&origin).ok().filter(|u| u.host_str().is_some()) else {
            return Err(origin);
        };
        let authority = |host: &str, port: Option<u16>| match port {
            Some(p) => format!("{}:{p}", host.to_ascii_lowercase()),
            None => host.to_ascii_lowercase(),
        };
        let from = authority(url.host_str().unwrap_or_default(), url.port());
        // The Host as the browser wrote it, its scheme's default port left off as in
        // an origin.
        let to = headers
            .get(axum::http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(|h| {
                let h = h.trim().to_ascii_lowercase();
                let default = match url.scheme() {
                    "https" => ":443",
                    _ => ":80",
                };
                h.strip_suffix(default).map(str::to_string).unwrap_or(h)
            });
        let public = self.hosts.public.as_deref() == url.host_str().map(str::to_ascii_lowercase).as_deref();
        match to {
            Some(to) if to == from => Ok(()),
            _ if public => Ok(()),
            _ => Err(origin),
        }
    }

    /// Whether a `/metrics` request may read the metrics.
    pub fn metrics_allowed(&self, headers: &HeaderMap) -> bool {
        match &self.metrics_token {
            None => self.metrics_open && !proxied(headers) && self.host_allowed(headers).is_ok(),
            Some(token) => bearer(headers).is_some_and(|b| token_eq(b.as_bytes(), token.as_bytes())),
        }
    }

    /// The `Set-Cookie` value for a correct login token; `None` when it is wrong.
    pub fn login(&self, typed: &str) -> Option<String> {
        let token = self.token.as_ref()?;
        token_eq(typed.trim().as_bytes(), token.as_bytes()).then(|| {
            let expires = chrono::Utc::now().timestamp() + SESSION_SECS;
            format!(
                "{}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}{}",
                self.cookie_name(),
                session_value(token, expires),
                if self.secure_cookie { "; Secure" } else { "" }
            )
        })
    }

    fn cookie_name(&self) -> &'static str {
        if self.secure_cookie {
            SECURE_COOKIE_NAME
        } else {
            COOKIE_NAME
        }
    }
}

/// Whether a proxy forwarded the request: the headers proxies add (nginx, Caddy,
/// Traefik, Envoy, load balancers). A proxy that adds none cannot be told apart from a
/// person on the machine, which is why the open inspector also needs
/// `STEWARD_PUBLIC_URL` to name no other host.
fn proxied(headers: &HeaderMap) -> bool {
    [
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",
        "via",
    ]
    .iter()
    .any(|h| headers.contains_key(*h))
}

/// The cookie value for `token` until `expires` (Unix seconds): `{expires}.{HMAC}`
/// keyed by the token, so the cookie never holds the token itself, cannot be extended,
/// and changing the token signs everyone out.
fn session_value(token: &str, expires: i64) -> String {
    let at = expires.to_string();
    let mac = crate::triggers::auth::sign_hex(
        token.as_bytes(),
        &[b"steward inspector session v2\0", at.as_bytes()],
    );
    format!("{at}.{mac}")
}

/// Whether `value` is a session cookie for `token` that has not expired at `now`.
fn valid_session(token: &str, value: &str, now: i64) -> bool {
    let Some(expires) = value.split_once('.').and_then(|(at, _)| at.parse::<i64>().ok()) else {
        return false;
    };
    expires > now
        && expires <= now + SESSION_SECS
        && token_eq(value.as_bytes(), session_value(token, expires).as_bytes())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    /// A browser's post from another site names that site in `Origin` and is refused;
    /// one from this steward's own page, or a program's (no `Origin`), passes.
    #[test]
    fn posts_from_other_sites_are_refused() {
        let access = AdminAccess::default();
        for (host, origin) in [
            ("127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("steward.corp.example", "https://steward.corp.example"),
            ("steward.corp.example:443", "https://steward.corp.example"),
            ("LOCALHOST:8080", "http://localhost:8080"),
        ] {
            assert_eq!(
                access.origin_allowed(&headers(&[("host", host), ("origin", origin)])),
                Ok(()),
                "{host} {origin}"
            );
        }
        assert_eq!(
            access.origin_allowed(&headers(&[("host", "127.0.0.1:8080")])),
            Ok(())
        );
        // Behind a proxy that passes its own upstream as `Host`: the public name passes.
        let proxied = AdminAccess {
            hosts: Hosts {
                bind: None,
                public: Some("steward.corp.example".into()),
            },
            ..AdminAccess::default()
        };
        assert_eq!(
            proxied.origin_allowed(&headers(&[
                ("host", "127.0.0.1:8080"),
                ("origin", "https://steward.corp.example")
            ])),
            Ok(())
        );
        for (host, origin) in [
            ("127.0.0.1:8080", "https://evil.example"),
            ("127.0.0.1:8080", "http://203.0.113.9"),
            ("127.0.0.1:8080", "http://127.0.0.1:9999"),
            ("127.0.0.1:8080", "null"),
        ] {
            assert_eq!(
                access.origin_allowed(&headers(&[("host", host), ("origin", origin)])),
                Err(origin.to_string()),
                "{host} {origin}"
            );
        }
        // Comparing digests keeps a token's length to itself: unequal lengths compare
        // as any other mismatch.
        assert!(token_eq(b"s3cret", b"s3cret") && !token_eq(b"s3cret", b"s3cre") && !token_eq(b"", b"x"));
    }

    #[test]
    fn closed_by_default_open_only_when_serve_says_loopback() {
        let access = AdminAccess::default();
        assert_eq!(access.viewer(&HeaderMap::new(), None), Err(Denied::Closed));
        let open = AdminAccess {
            open: true,
            ..AdminAccess::default()
        };
        assert_eq!(open.viewer(&HeaderMap::new(), None), Ok(Viewer::Local));
        // A proxy on the same machine connects from loopback too: what it adds gives it
        // away, and the open inspector refuses it.
        for header in [
            "x-forwarded-for",
            "forwarded",
            "x-real-ip",
            "via",
            "x-forwarded-host",
        ] {
            assert_eq!(
                open.viewer(&headers(&[(header, "203.0.113.7")]), None),
                Err(Denied::Proxied),
                "{header}"
            );
        }
    }

    #[test]
    fn token_as_bearer_or_login_cookie() {
        let access = AdminAccess {
            token: Some("s3cret".into()),
            open: true,
            ..AdminAccess::default()
        };
        assert_eq!(
            access.viewer(&HeaderMap::new(), None),
            Err(Denied::NeedsToken),
            "open never overrides a token"
        );
        assert_eq!(
            access.viewer(&headers(&[("authorization", "Bearer s3cret")]), None),
            Ok(Viewer::Admin)
        );
        assert_eq!(
            access.viewer(&headers(&[("authorization", "Bearer wrong")]), None),
            Err(Denied::NeedsToken)
        );
        assert!(access.login("wrong").is_none());
        let set = access.login("s3cret").unwrap();
        assert!(!set.contains("s3cret"));
        let value = set.split(';').next().unwrap();
        assert_eq!(
            access.viewer(&headers(&[("cookie", &format!("theme=dark; {value}"))]), None),
            Ok(Viewer::Admin)
        );
        assert!(
            !set.contains("Secure"),
            "plain HTTP unless the public URL is https"
        );
        // The expiry is signed: an old cookie, or one whose expiry was pushed out, fails.
        let now = chrono::Utc::now().timestamp();
        let old = session_value("s3cret", now - 1);
        assert!(!valid_session("s3cret", &old, now));
        let (_, mac) = old.split_once('.').unwrap();
        assert!(!valid_session("s3cret", &format!("{}.{mac}", now + 600), now));
        assert!(valid_session("s3cret", &session_value("s3cret", now + 600), now));
        assert!(!valid_session("other", &session_value("s3cret", now + 600), now));
        let tls = AdminAccess {
            secure_cookie: true,
            ..access.clone()
        };
        let set = tls.login("s3cret").unwrap();
        assert!(
            set.starts_with("__Host-steward_admin=") && set.ends_with("; Secure"),
            "{set}"
        );
        let value = set.split(';').next().unwrap();
        assert_eq!(
            tls.viewer(&headers(&[("cookie", value)]), None),
            Ok(Viewer::Admin)
        );
    }

    #[test]
    fn trusted_header_names_the_person() {
        let access = AdminAccess {
            trusted_user_header: Some("x-forwarded-user".into()),
            trusted_proxies: crate::http::networks::Networks::parse("10.0.0.5").unwrap(),
            token: Some("s3cret".into()),
            ..AdminAccess::default()
        };
        let named = headers(&[("x-forwarded-user", "ada@example.com")]);
        let proxy = Some("10.0.0.5".parse().unwrap());
        assert_eq!(
            access.viewer(&named, proxy),
            Ok(Viewer::Person("ada@example.com".into()))
        );
        assert_eq!(access.viewer(&HeaderMap::new(), proxy), Err(Denied::NeedsToken));
        // From anyone else (another pod, no known peer) the header is nothing: the token
        // is still asked for.
        for peer in [Some("10.0.0.9".parse().unwrap()), None] {
            assert_eq!(access.viewer(&named, peer), Err(Denied::NeedsToken), "{peer:?}");
        }
        let both = headers(&[
            ("x-forwarded-user", "ada@example.com"),
            ("authorization", "Bearer s3cret"),
        ]);
        assert_eq!(
            access.viewer(&both, Some("10.0.0.9".parse().unwrap())),
            Ok(Viewer::Admin)
        );
        // A proxy that appends to a header the client sent passes two: no one.
        let appended = headers(&[
            ("x-forwarded-user", "admin@example.com"),
            ("x-forwarded-user", "ada@example.com"),
        ]);
        assert_eq!(access.viewer(&appended, proxy), Err(Denied::NeedsToken));
    }

    #[test]
    fn metrics_take_their_bearer_token_and_are_closed_without_one_unless_open() {
        let access = AdminAccess {
            metrics_token: Some("m".into()),
            // A token wins over openness: it is then always asked for.
            metrics_open: true,
            ..AdminAccess::default()
        };
        assert!(!access.metrics_allowed(&HeaderMap::new()));
        assert!(!access.metrics_allowed(&headers(&[("authorization", "Bearer n")])));
        assert!(access.metrics_allowed(&headers(&[("authorization", "Bearer m")])));
        // Deny by default: no token and not marked open (a non-loopback bind) is closed.
        assert!(!AdminAccess::default().metrics_allowed(&HeaderMap::new()));
        let loopback = AdminAccess {
            metrics_open: true,
            ..AdminAccess::default()
        };
        assert!(loopback.metrics_allowed(&HeaderMap::new()));
        assert!(loopback.metrics_allowed(&headers(&[("host", "127.0.0.1:8080")])));
        // Open metrics answer neither a proxy nor a rebound host name.
        assert!(!loopback.metrics_allowed(&headers(&[("x-forwarded-for", "203.0.113.7")])));
        assert!(!loopback.metrics_allowed(&headers(&[("host", "rebind.attacker.example:8080")])));
    }
}
