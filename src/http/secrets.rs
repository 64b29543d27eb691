//! Secrets a sandboxed program uses without holding them: its environment has a
//! placeholder (`stw_secret_<random>`, new for every run), and the egress proxy puts the
//! real value in place of the placeholder in the request headers it names, on the hosts
//! listed for that secret only. A placeholder anywhere else (another host, another
//! header, a URL, a plain-http request) refuses the request. Values live in steward's
//! memory only, and the proxy writes the placeholder back over any value a server echoes.

use base64::Engine;

/// One secret of an egress policy (`egress.secrets.NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRule {
    /// The variable the program sees (holding the placeholder).
    pub name: String,
    /// steward's own variable holding the value.
    pub env: String,
    /// Hosts it is for, as `allow` entries (`api.example.com`, `*.example.com`).
    pub hosts: Vec<String>,
    /// The only header it may go in (lower case); `None`: any header.
    pub header: Option<String>,
    /// What a header that is exactly the placeholder becomes, `{}` standing for the
    /// value (`Bearer {}`); a placeholder inside a longer value is replaced by the bare
    /// value (the program wrote its own `Bearer `).
    pub format: String,
}

/// What the variable holding a secret's value is named: never one of steward's own
/// (`OPENAI_API_KEY`, `SLACK_BOT_TOKEN`), so those can never be handed to a program.
pub const SECRET_VAR_PREFIX: &str = "STEWARD_SECRET_";

/// Whether `env` may hold a secret for sandboxed programs: `STEWARD_SECRET_<NAME>`
/// (not one ending `_HOSTS`: that names where another secret may go).
pub fn is_secret_var(env: &str) -> bool {
    env.len() > SECRET_VAR_PREFIX.len() && env.starts_with(SECRET_VAR_PREFIX) && !env.ends_with(HOSTS_SUFFIX)
}

/// `STEWARD_SECRET_<NAME>_HOSTS`, set by whoever sets the secret: the hosts (`allow`
/// entries, comma-separated) its value may go to. A config can only narrow them, so one
/// team's agent file cannot send another team's token to a host of its choosing.
pub const HOSTS_SUFFIX: &str = "_HOSTS";

/// The variable binding secret variable `env` to its hosts.
pub fn hosts_var(env: &str) -> String {
    format!("{env}{HOSTS_SUFFIX}")
}

/// The hosts `STEWARD_SECRET_<NAME>_HOSTS` lets secret variable `env` go to, read with
/// `var`; why not when it is unset or empty.
fn bound_hosts(env: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<Vec<String>, String> {
    let bound_var = hosts_var(env);
    let bound: Vec<String> = var(&bound_var)
        .unwrap_or_default()
        .split([',', ' ', '\n'])
        .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect();
    if bound.is_empty() {
        return Err(format!(
            "is not bound to hosts: set {bound_var} (the hosts its value may go to, comma-separated) beside {env}"
        ));
    }
    Ok(bound)
}

/// Whether `host` (as a URL spells it) is this machine: `localhost` or a loopback
/// address.
pub fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `Ok` when the value of variable `env` may be sent to `scheme://host:port` as it is
/// (an MCP server's token): any variable but a `STEWARD_SECRET_<NAME>`, and such a one
/// only over https (or to this machine) and within its `_HOSTS` binding, so a config
/// file cannot carry another team's secret to a host of its choosing by naming it where
/// a value is sent whole.
pub fn may_send(
    env: &str,
    scheme: &str,
    host: &str,
    port: u16,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    if !env.starts_with(SECRET_VAR_PREFIX) {
        return Ok(());
    }
    // Never in clear text past this machine, as the proxy never puts one in plain HTTP.
    if scheme != "https" && !is_loopback(host) {
        return Err(format!(
            "{env} goes only over https; this server is {scheme}://{host}: refused"
        ));
    }
    let bound = bound_hosts(env, var).map_err(|unbound| format!("{env} {unbound}"))?;
    if host_listed(&bound, host, port) {
        Ok(())
    } else {
        Err(format!(
            "{env} may go only to {} ({}); this server is {host}:{port}: refused",
            bound.join(", "),
            hosts_var(env)
        ))
    }
}

/// Whether config host entry `entry` (`host`, `*.domain`, optional `:port`) lies within
/// the operator's `bound` entries.
fn within_bound(bound: &[String], entry: &str) -> bool {
    let entry = entry.trim().trim_end_matches('.').to_ascii_lowercase();
    if bound.contains(&entry) {
        return true;
    }
    let (host, port) = match entry.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => (h, p.parse::<u16>().ok()),
        _ => (entry.as_str(), None),
    };
    if let Some(domain) = host.strip_prefix("*.") {
        // A wildcard only under an operator's wildcard for the same or a wider domain.
        return bound.iter().any(|b| {
            let (b_host, b_port) = b
                .rsplit_once(':')
                .map_or((b.as_str(), None), |(h, p)| (h, Some(p)));
            let port_ok = match (port, b_port) {
                (None, None) => true,
                (Some(p), Some(bp)) => bp == p.to_string(),
                _ => false,
            };
            b_host
                .strip_prefix("*.")
                .is_some_and(|wide| port_ok && (domain == wide || domain.ends_with(&format!(".{wide}"))))
        });
    }
    match port {
        Some(p) => host_listed(bound, host, p),
        None => host_listed(bound, host, 80) && host_listed(bound, host, 443),
    }
}

/// The placeholder prefix (documented: a program can tell a placeholder from a value).
pub const PREFIX: &str = "stw_secret_";

/// A fresh placeholder: the prefix and 32 random hex digits.
pub fn placeholder() -> String {
    let mut bytes = [0u8; 16];
    // The system's generator cannot fail on Linux; a placeholder is not itself a
    // secret, so a fallback to the process's generator is safe.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        bytes = fastrand::u128(..).to_le_bytes();
    }
    format!("{PREFIX}{}", hex::encode(bytes))
}

/// One secret of a run: its rule, placeholder and value.
#[derive(Clone)]
pub struct RunSecret {
    pub rule: SecretRule,
    pub placeholder: String,
    value: String,
}

impl std::fmt::Debug for RunSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSecret")
            .field("name", &self.rule.name)
            .field("placeholder", &self.placeholder)
            .finish_non_exhaustive()
    }
}

/// A run's secrets.
#[derive(Debug, Clone, Default)]
pub struct RunSecrets {
    entries: Vec<RunSecret>,
}

/// `host:port` matches one of `patterns` (`allow` entries: `host`, `*.domain`, with an
/// optional `:port`; a bare entry means ports 80 and 443).
pub fn host_listed(patterns: &[String], host: &str, port: u16) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    patterns.iter().any(|entry| {
        let (pattern, port_ok) = match entry.rsplit_once(':') {
            Some((p, n)) if n.chars().all(|c| c.is_ascii_digit()) => (p, n.parse() == Ok(port)),
            _ => (entry.as_str(), port == 80 || port == 443),
        };
        port_ok
            && match pattern.strip_prefix("*.") {
                Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
                None => pattern == host,
            }
    })
}

impl RunSecrets {
    /// Placeholders for `rules`, their values read with `var`; the names of unset
    /// variables when any is missing. A rule naming a variable other than
    /// `STEWARD_SECRET_<NAME>` is refused whatever validation let through: steward's own
    /// keys never reach a program.
    pub fn new(rules: &[SecretRule], var: &dyn Fn(&str) -> Option<String>) -> Result<RunSecrets, String> {
        if let Some(rule) = rules.iter().find(|r| !is_secret_var(&r.env)) {
            return Err(format!(
                "secret {} reads {}, which is not a {SECRET_VAR_PREFIX}<NAME> variable: refused",
                rule.name, rule.env
            ));
        }
        let mut entries = Vec::new();
        let mut missing = Vec::new();
        for rule in rules {
            let bound_var = hosts_var(&rule.env);
            let bound =
                bound_hosts(&rule.env, var).map_err(|unbound| format!("secret {} {unbound}", rule.name))?;
            if let Some(outside) = rule.hosts.iter().find(|h| !within_bound(&bound, h)) {
                return Err(format!(
                    "secret {} may go only to {} ({bound_var}); the config sends it to {outside}: refused",
                    rule.name,
                    bound.join(", ")
                ));
            }
            match var(&rule.env) {
                Some(value) if !value.is_empty() => entries.push(RunSecret {
                    rule: rule.clone(),
                    placeholder: placeholder(),
                    value,
                }),
                _ => missing.push(format!("{} (for {})", rule.env, rule.name)),
            }
        }
        if !missing.is_empty() {
            return Err(format!(
                "steward's environment does not set {}",
                missing.join(", ")
            ));
        }
        Ok(RunSecrets { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The program's variables: each name with its placeholder.
    pub fn env(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .map(|e| (e.rule.name.clone(), e.placeholder.clone()))
            .collect()
    }

    /// Whether requests to `host:port` must be opened: some secret is for it.
    pub fn intercepts(&self, host: &str, port: u16) -> bool {
        self.entries
            .iter()
            .any(|e| host_listed(&e.rule.hosts, host, port))
    }

    /// The first secret whose placeholder is in `text`.
    fn found_in(&self, text: &[u8]) -> Option<&RunSecret> {
        self.entries
            .iter()
            .find(|e| contains(text, e.placeholder.as_bytes()))
    }

    /// Refuses a request the proxy passes on unread (plain http) when it carries a
    /// placeholder: a secret never goes in clear text.
    pub fn check_plain(&self, head: &[u8], host: &str) -> Result<(), String> {
        match self.found_in(head) {
            Some(e) => Err(format!(
                "the placeholder of secret {} was sent over plain http to {host}; secrets go only over https to their hosts",
                e.rule.name
            )),
            None => Ok(()),
        }
    }

    /// Puts values in place of placeholders in `headers` of a request to `host:port`
    /// for `path_and_query`; the names of the secrets used, or why the request is
    /// refused.
    pub fn inject(
        &self,
        host: &str,
        port: u16,
        path_and_query: &str,
        headers: &mut http::HeaderMap,
    ) -> Result<Vec<String>, String> {
        if let Some(e) = self.found_in(path_and_query.as_bytes()) {
            return Err(format!(
                "the placeholder of secret {} is in the URL; steward puts secrets only in headers",
                e.rule.name
            ));
        }
        let mut used: Vec<String> = Vec::new();
        for (name, value) in headers.iter_mut() {
            let bytes = value.as_bytes();
            let basic = basic_credentials(name, bytes);
            let searched = basic.as_deref().unwrap_or(bytes);
            // Every secret whose placeholder is here must allow this host and header:
            // one header may carry several.
            let present: Vec<&RunSecret> = self
                .entries
                .iter()
                .filter(|e| contains(searched, e.placeholder.as_bytes()))
                .collect();
            let Some(first) = present.first() else {
                continue;
            };
            for rule in present.iter().map(|e| &e.rule) {
                if !host_listed(&rule.hosts, host, port) {
                    return Err(format!(
                        "the placeholder of secret {} was sent to {host}, which is not one of its hosts ({})",
                        rule.name,
                        rule.hosts.join(", ")
                    ));
                }
                if let Some(only) = &rule.header
                    && only != name.as_str()
                {
                    return Err(format!(
                        "secret {} goes only in the {only} header; its placeholder was in {name}",
                        rule.name
                    ));
                }
            }
            let rule = &first.rule;
            let mut text = searched.to_vec();
            for e in &self.entries {
                if contains(&text, e.placeholder.as_bytes()) {
                    text = if basic.is_none() && text == e.placeholder.as_bytes() {
                        e.rule.format.replace("{}", &e.value).into_bytes()
                    } else {
                        replace(&text, e.placeholder.as_bytes(), e.value.as_bytes())
                    };
                    if !used.contains(&e.rule.name) {
                        used.push(e.rule.name.clone());
                    }
                }
            }
            let text = match basic {
                Some(_) => format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(&text)
                )
                .into_bytes(),
                None => text,
            };
            *value = http::HeaderValue::from_bytes(&text)
                .map_err(|_| format!("secret {}'s value cannot go in a header", rule.name))?;
            value.set_sensitive(true);
        }
        Ok(used)
    }

    /// A scrubber writing placeholders back over values in a response: each value as
    /// it is, and as it reads inside any base64 text (an `Authorization: Basic` header
    /// the proxy wrote, echoed back by the host, would otherwise hand the script the
    /// value to decode).
    pub fn scrubber(&self) -> Scrub {
        let mut pairs = Vec::new();
        for e in &self.entries {
            let placeholder = e.placeholder.as_bytes().to_vec();
            pairs.push((e.value.as_bytes().to_vec(), placeholder.clone()));
            for core in base64_cores(e.value.as_bytes()) {
                pairs.push((core, placeholder.clone()));
            }
        }
        Scrub::new(pairs)
    }
}

/// The base64 text `value` encodes to wherever it sits in what is encoded: at each of
/// the three alignments, the groups made of its bytes alone (the first and last groups
/// also hold neighbouring bytes, so they are left off). Cores under 8 characters are
/// left out: too short to tell from other text.
fn base64_cores(value: &[u8]) -> Vec<Vec<u8>> {
    let mut cores = Vec::new();
    for lead in 0..3usize {
        let mut padded = vec![0u8; lead];
        padded.extend_from_slice(value);
        let encoded = base64::engine::general_purpose::STANDARD.encode(&padded);
        let start = if lead == 0 { 0 } else { 4 };
        let end = 4 * (padded.len() / 3);
        if end >= start + 8 {
            cores.push(encoded.as_bytes()[start..end].to_vec());
        }
    }
    cores
}

/// The decoded `user:password` of an `Authorization: Basic` header (the scheme in any
/// case, the base64 padded or not).
fn basic_credentials(name: &http::HeaderName, value: &[u8]) -> Option<Vec<u8>> {
    if name != http::header::AUTHORIZATION || value.len() < 6 || !value[..6].eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let encoded = value[6..].trim_ascii();
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(encoded))
        .ok()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// Replaces secret values with their placeholders in a stream of chunks, including
/// values split across chunks (it holds back the last `longest - 1` bytes).
#[derive(Debug, Default)]
pub struct Scrub {
    /// (value, placeholder)
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    held: Vec<u8>,
    keep: usize,
}

impl Scrub {
    fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Scrub {
        let mut pairs: Vec<_> = pairs.into_iter().filter(|(v, _)| !v.is_empty()).collect();
        // Longest first: a value that begins another is not matched inside it.
        pairs.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        let keep = pairs.iter().map(|(v, _)| v.len() - 1).max().unwrap_or(0);
        Scrub {
            pairs,
            held: Vec::new(),
            keep,
        }
    }

    /// The part of `chunk` (after what was held back) that can go on.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.pairs.is_empty() {
            return chunk.to_vec();
        }
        self.held.extend_from_slice(chunk);
        // Before `safe`, a value starting there is whole in `held` or is not there.
        let safe = self.held.len().saturating_sub(self.keep);
        self.scrub_held(safe)
    }

    /// What was held back, at the end of the stream.
    pub fn finish(&mut self) -> Vec<u8> {
        self.scrub_held(self.held.len())
    }

    /// `held` scrubbed from its start to `end` (or just past it, to the end of a value
    /// that starts before it), taken out of `held`.
    fn scrub_held(&mut self, end: usize) -> Vec<u8> {
        let held = &self.held;
        let mut out = Vec::with_capacity(held.len());
        let mut i = 0;
        while i < end {
            match self.pairs.iter().find(|(v, _)| held[i..].starts_with(v)) {
                Some((v, p)) => {
                    out.extend_from_slice(p);
                    i += v.len();
                }
                None => {
                    out.push(held[i]);
                    i += 1;
                }
            }
        }
        self.held.drain(..i.min(self.held.len()));
        out
    }

    /// Whether anything is scrubbed at all.
    pub fn is_noop(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `value` with placeholders over secret values (a response header).
    pub fn header(&self, value: &[u8]) -> Vec<u8> {
        self.pairs
            .iter()
            .fold(value.to_vec(), |text, (v, p)| replace(&text, v, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> RunSecrets {
        let rules = vec![
            SecretRule {
                name: "GITHUB_TOKEN".into(),
                env: "STEWARD_SECRET_GH".into(),
                hosts: vec!["api.github.com".into()],
                header: Some("authorization".into()),
                format: "Bearer {}".into(),
            },
            SecretRule {
                name: "STATUS_KEY".into(),
                env: "STEWARD_SECRET_STATUS".into(),
                hosts: vec!["*.status.example".into()],
                header: None,
                format: "{}".into(),
            },
        ];
        RunSecrets::new(&rules, &|v| match v {
            "STEWARD_SECRET_GH" => Some("ghp_real".into()),
            "STEWARD_SECRET_GH_HOSTS" => Some("api.github.com".into()),
            "STEWARD_SECRET_STATUS" => Some("sk_live".into()),
            "STEWARD_SECRET_STATUS_HOSTS" => Some("*.example".into()),
            _ => None,
        })
        .unwrap()
    }

    /// The operator binds a secret to hosts beside its value; a config may name those
    /// or fewer, never others (one team's file cannot send another's token elsewhere).
    /// A server's token named as a `STEWARD_SECRET_*` goes whole only over https (or to
    /// this machine), within its binding; other variables are the operator's own.
    #[test]
    fn a_whole_secret_goes_only_over_https_within_its_binding() {
        let var = |v: &str| match v {
            "STEWARD_SECRET_NOTES_HOSTS" => Some("notes.corp, 127.0.0.1:8000".to_string()),
            _ => None,
        };
        let send =
            |scheme: &str, host: &str, port: u16| may_send("STEWARD_SECRET_NOTES", scheme, host, port, &var);
        assert!(send("https", "notes.corp", 443).is_ok());
        assert!(send("http", "127.0.0.1", 8000).is_ok());
        assert!(send("http", "notes.corp", 80).is_err_and(|e| e.contains("only over https")));
        assert!(send("https", "evil.example", 443).is_err_and(|e| e.contains("may go only to")));
        assert!(
            may_send("STEWARD_SECRET_OTHER", "https", "notes.corp", 443, &var)
                .is_err_and(|e| e.contains("_HOSTS"))
        );
        assert!(may_send("GITHUB_MCP_TOKEN", "http", "anywhere.example", 80, &var).is_ok());
    }

    #[test]
    fn a_config_sends_a_secret_only_where_the_operator_bound_it() {
        let rule = |hosts: &[&str]| SecretRule {
            name: "GH".into(),
            env: "STEWARD_SECRET_GH".into(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            header: None,
            format: "{}".into(),
        };
        let env = |bound: &'static str| {
            move |v: &str| match v {
                "STEWARD_SECRET_GH" => Some("ghp_real".to_string()),
                "STEWARD_SECRET_GH_HOSTS" => Some(bound.to_string()),
                _ => None,
            }
        };
        let ok = |hosts: &[&str], bound: &'static str| RunSecrets::new(&[rule(hosts)], &env(bound)).is_ok();
        assert!(ok(&["api.github.com"], "api.github.com, uploads.github.com"));
        assert!(ok(&["API.github.com."], "api.github.com"));
        assert!(ok(&["api.github.com:443"], "api.github.com"));
        assert!(ok(&["api.github.com", "raw.github.com"], "*.github.com"));
        assert!(ok(&["*.eu.github.com"], "*.github.com"));
        assert!(ok(&["ghe.corp:8443"], "ghe.corp:8443"));
        assert!(!ok(&["evil.example"], "api.github.com"));
        assert!(!ok(&["api.github.com", "evil.example"], "api.github.com"));
        assert!(!ok(&["*.github.com"], "api.github.com"));
        assert!(!ok(&["ghe.corp:8443"], "ghe.corp"));
        assert!(!ok(&["github.com.evil.example"], "*.github.com"));
        let err = RunSecrets::new(&[rule(&["evil.example"])], &env("api.github.com")).unwrap_err();
        assert_eq!(
            err,
            "secret GH may go only to api.github.com (STEWARD_SECRET_GH_HOSTS); the config sends it to evil.example: refused"
        );
        let unbound = RunSecrets::new(&[rule(&["api.github.com"])], &|v| {
            (v == "STEWARD_SECRET_GH").then(|| "ghp_real".to_string())
        })
        .unwrap_err();
        assert!(
            unbound.starts_with("secret GH is not bound to hosts: set STEWARD_SECRET_GH_HOSTS"),
            "{unbound}"
        );
        assert!(!is_secret_var("STEWARD_SECRET_GH_HOSTS"));
    }

    fn ph(s: &RunSecrets, name: &str) -> String {
        s.env().into_iter().find(|(n, _)| n == name).unwrap().1
    }

    #[test]
    fn placeholders_are_fresh_and_values_stay_out_of_debug() {
        let (a, b) = (secrets(), secrets());
        let p = ph(&a, "GITHUB_TOKEN");
        assert!(p.starts_with(PREFIX) && p.len() == PREFIX.len() + 32, "{p}");
        assert_ne!(p, ph(&b, "GITHUB_TOKEN"));
        assert!(!format!("{a:?}").contains("ghp_real"));
        let rule = |env: &str| SecretRule {
            name: "X".into(),
            env: env.into(),
            hosts: vec![],
            header: None,
            format: "{}".into(),
        };
        let missing = RunSecrets::new(&[rule("STEWARD_SECRET_UNSET")], &|v| {
            (v == "STEWARD_SECRET_UNSET_HOSTS").then(|| "example.com".to_string())
        })
        .unwrap_err();
        assert_eq!(
            missing,
            "steward's environment does not set STEWARD_SECRET_UNSET (for X)"
        );
        // steward's own key is refused even when set, whatever let the rule through.
        for env in ["OPENAI_API_KEY", "STEWARD_SECRET_"] {
            let refused = RunSecrets::new(&[rule(env)], &|_| Some("sk-real".into())).unwrap_err();
            assert_eq!(
                refused,
                format!("secret X reads {env}, which is not a STEWARD_SECRET_<NAME> variable: refused")
            );
        }
    }

    #[test]
    fn values_go_in_named_headers_on_listed_hosts_only() {
        let s = secrets();
        let (gh, status) = (ph(&s, "GITHUB_TOKEN"), ph(&s, "STATUS_KEY"));
        // A bare placeholder takes the format; inside a value it is the bare value.
        let mut h = http::HeaderMap::new();
        h.insert("authorization", gh.parse().unwrap());
        assert_eq!(
            s.inject("api.github.com", 443, "/user", &mut h).unwrap(),
            ["GITHUB_TOKEN"]
        );
        assert_eq!(h["authorization"], "Bearer ghp_real");
        assert!(h["authorization"].is_sensitive());
        let mut h = http::HeaderMap::new();
        h.insert("authorization", format!("token {gh}").parse().unwrap());
        s.inject("api.github.com", 443, "/", &mut h).unwrap();
        assert_eq!(h["authorization"], "token ghp_real");
        // Any header, for a secret without one; the domain pattern.
        let mut h = http::HeaderMap::new();
        h.insert("x-api-key", status.parse().unwrap());
        assert_eq!(
            s.inject("eu.status.example", 443, "/", &mut h).unwrap(),
            ["STATUS_KEY"]
        );
        assert_eq!(h["x-api-key"], "sk_live");
        // Basic credentials are decoded, filled and encoded again.
        let mut h = http::HeaderMap::new();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("bot:{status}"));
        h.insert("authorization", format!("Basic {basic}").parse().unwrap());
        s.inject("status.example", 443, "/", &mut h).unwrap();
        let sent = base64::engine::general_purpose::STANDARD.encode("bot:sk_live");
        assert_eq!(h["authorization"], format!("Basic {sent}").as_str());
        // Two placeholders in one header: each secret's hosts are checked.
        let mut h = http::HeaderMap::new();
        h.insert("x-api-key", format!("{status} {gh}").parse().unwrap());
        assert!(
            s.inject("eu.status.example", 443, "/", &mut h)
                .unwrap_err()
                .contains("secret GITHUB_TOKEN was sent to eu.status.example")
        );
        let mut h = http::HeaderMap::new();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{status}:{gh}"));
        h.insert("authorization", format!("basic {basic}").parse().unwrap());
        assert!(s.inject("status.example", 443, "/", &mut h).is_err());
        // Refusals.
        let mut h = http::HeaderMap::new();
        h.insert("authorization", gh.parse().unwrap());
        assert_eq!(
            s.inject("eu.status.example", 443, "/", &mut h).unwrap_err(),
            "the placeholder of secret GITHUB_TOKEN was sent to eu.status.example, which is not one of its hosts (api.github.com)"
        );
        let mut h = http::HeaderMap::new();
        h.insert("x-token", gh.parse().unwrap());
        assert_eq!(
            s.inject("api.github.com", 443, "/", &mut h).unwrap_err(),
            "secret GITHUB_TOKEN goes only in the authorization header; its placeholder was in x-token"
        );
        let mut h = http::HeaderMap::new();
        assert!(
            s.inject("api.github.com", 443, &format!("/x?t={gh}"), &mut h)
                .unwrap_err()
                .contains("is in the URL")
        );
        assert!(
            s.check_plain(format!("GET / HTTP/1.1\r\nA: {gh}").as_bytes(), "h")
                .is_err()
        );
        assert!(s.check_plain(b"GET / HTTP/1.1\r\n", "h").is_ok());
        assert!(s.intercepts("api.github.com", 443) && !s.intercepts("pypi.org", 443));
    }

    #[test]
    fn echoed_values_are_scrubbed_even_across_chunks() {
        let s = secrets();
        let gh = ph(&s, "GITHUB_TOKEN");
        let mut scrub = s.scrubber();
        let mut out = scrub.push(b"{\"token\": \"ghp_r");
        out.extend(scrub.push(b"eal\", \"other\": \"sk_"));
        out.extend(scrub.push(b"live and more text\"}"));
        out.extend(scrub.finish());
        let status = ph(&s, "STATUS_KEY");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{{\"token\": \"{gh}\", \"other\": \"{status} and more text\"}}")
        );
        assert_eq!(scrub.header(b"x ghp_real"), format!("x {gh}").into_bytes());
    }

    /// A host that echoes the `Authorization: Basic` header the proxy wrote would hand
    /// the script the value in base64: that is scrubbed too, at any alignment.
    #[test]
    fn a_basic_header_echoed_back_is_scrubbed() {
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let s = secrets();
        let gh = ph(&s, "GITHUB_TOKEN");
        let mut h = http::HeaderMap::new();
        let basic = format!("Basic {}", b64(&format!("x:{gh}")));
        h.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_str(&basic).unwrap(),
        );
        s.inject("api.github.com", 443, "/echo", &mut h).unwrap();
        let sent = h[http::header::AUTHORIZATION].to_str().unwrap().to_string();
        let sent_b64 = sent.strip_prefix("Basic ").unwrap().to_string();
        assert_eq!(sent_b64, b64("x:ghp_real"));
        for echoed in [
            sent_b64,
            b64("ghp_real!"),
            b64("a ghp_real"),
            b64("ab ghp_real and more"),
        ] {
            let mut scrub = s.scrubber();
            let mut out = scrub.push(format!("{{\"authorization\": \"Basic {echoed}\"}}").as_bytes());
            out.extend(scrub.finish());
            let out = String::from_utf8(out).unwrap();
            assert!(!out.contains(&echoed) && out.contains(&gh), "{echoed}: {out}");
        }
    }
}
