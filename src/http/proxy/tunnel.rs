//! What a program sends first through a `CONNECT` tunnel, checked before any of it goes
//! on. A tunnel is never decrypted, so this is the one look the proxy gets:
//!
//! - a TLS `ClientHello` must name the tunnel's own host as its server name, or none (a
//!   shared ingress or CDN routes by that name, so another name would reach a host the
//!   allow list never saw); any TLS record type first counts as TLS, so a leading alert
//!   cannot skip the check; a second hello after a server's HelloRetryRequest is held
//!   to the same name ([`LaterHellos`]). An Encrypted Client Hello's inner name is not seen
//!   (browsers send a decoy one to every site), like a `Host` inside TLS;
//! - to ports 80 and 443, nothing but TLS;
//! - elsewhere (a port an allow entry names), a plain HTTP request is refused: its
//!   `Host`, and any request pipelined after it, would pass unchecked (plain HTTP goes
//!   through the proxy as a request, where `Host` comes from the checked URL), and so is
//!   a PROXY protocol header; anything else (another protocol) passes as it is.

/// The verdict on a tunnel's first bytes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum First {
    /// Not enough bytes to tell yet.
    More,
    /// Relay them and everything after.
    Pass,
    /// Close the tunnel, for this reason (never quoting what the program sent).
    Refuse(String),
}

/// Most bytes of a `ClientHello` read before deciding: TLS allows 16 KB a record, and a
/// hello with post-quantum key shares is under 2 KB.
const MAX_HELLO: usize = 20 * 1024;
/// Longest first line of a plain-text protocol read before deciding whether it is HTTP.
const MAX_LINE: usize = 8 * 1024;

/// Judges the first bytes `buf` a program sent through a tunnel to `host` (lowercase,
/// as the `CONNECT` named it) on `port`. `More` only while `buf` is below the limits
/// above: a caller that keeps reading always reaches `Pass` or `Refuse`.
pub(super) fn judge(buf: &[u8], host: &str, port: u16) -> First {
    match buf.first() {
        None => First::More,
        // ChangeCipherSpec, alert, handshake, application data, heartbeat: a TLS
        // record, of which only a handshake may come first.
        Some(0x14..=0x18) if buf.len() < 2 => First::More,
        Some(0x14..=0x18) if buf[1] == 0x03 => tls(buf, host),
        Some(_) if matches!(port, 80 | 443) => First::Refuse(format!(
            "a tunnel to port {port} carries TLS only (plain HTTP goes through the proxy as a request, an http:// URL)"
        )),
        Some(_) => plain(buf),
    }
}

/// Blanks a server skips before or between a request line's parts.
fn blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// A plain-text start: HTTP if its first line is a request line (`token SP target`,
/// with an `HTTP/` version, or a target that is a path, `*` or a URL, as HTTP/0.9's
/// was), or a PROXY protocol header; blank lines before it are skipped, as servers do.
fn plain(buf: &[u8]) -> First {
    let too_long = || First::Refuse("the tunnel's first line is too long to check".into());
    let start = buf.iter().take_while(|b| blank(**b)).count();
    let line = &buf[start..];
    let method = line.iter().take_while(|b| is_tchar(**b)).count();
    match line.get(method) {
        // Blanks, or token characters, so far: perhaps the start of a request.
        None if buf.len() < MAX_LINE => return First::More,
        None => return too_long(),
        Some(b' ' | b'\t') if method > 0 => {}
        Some(_) => return First::Pass,
    }
    let Some(end) = line.iter().position(|b| *b == b'\n') else {
        return match buf.len() < MAX_LINE {
            true => First::More,
            false => too_long(),
        };
    };
    let mut words = line[..end].split(|b| blank(*b)).filter(|w| !w.is_empty());
    let (first, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let version = words.next_back().unwrap_or(target);
    let http = version.len() >= 5 && version[..5].eq_ignore_ascii_case(b"HTTP/")
        || target.starts_with(b"/")
        || target == b"*"
        || target.windows(3).any(|w| w == b"://");
    match (http, first == b"PROXY") {
        (true, _) => First::Refuse(
            "plain HTTP goes through the proxy as a request (an http:// URL), not through a tunnel".into(),
        ),
        (_, true) => First::Refuse("a PROXY protocol header is refused in a tunnel".into()),
        _ => First::Pass,
    }
}

/// RFC 9110's token characters, of which a method is made.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A TLS start: handshake records until the `ClientHello` is whole, then its server
/// name against `host`.
fn tls(buf: &[u8], host: &str) -> First {
    let mut handshake = Vec::new();
    let mut at = 0;
    loop {
        let more = || match buf.len() < MAX_HELLO {
            true => First::More,
            false => First::Refuse("the tunnel's TLS ClientHello is too large to check".into()),
        };
        let Some(header) = buf.get(at..at + 5) else {
            return more();
        };
        if header[0] != 0x16 || header[1] != 0x03 {
            return First::Refuse("the tunnel's TLS handshake is malformed".into());
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        let Some(body) = buf.get(at + 5..at + 5 + len) else {
            return more();
        };
        handshake.extend_from_slice(body);
        at += 5 + len;
        let Some(&[kind, a, b, c]) = handshake.get(..4) else {
            continue;
        };
        if kind != 1 {
            return First::Refuse("the tunnel's TLS handshake does not start with a ClientHello".into());
        }
        let need = 4 + (usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c));
        if need > MAX_HELLO {
            return First::Refuse("the tunnel's TLS ClientHello is too large to check".into());
        }
        let Some(hello) = handshake.get(4..need) else {
            continue;
        };
        return match server_name(hello) {
            None => First::Refuse("the tunnel's TLS ClientHello is malformed".into()),
            Some(None) => First::Pass,
            Some(Some(name)) if same_host(&name, host) => First::Pass,
            Some(Some(_)) => First::Refuse(format!(
                "the TLS server name sent through the tunnel is not {host}, the host it was opened to"
            )),
        };
    }
}

/// `a` and `b` name the same host: ASCII case and a final `.` aside.
fn same_host(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// The `server_name` extension's host name in a `ClientHello` body (RFC 8446 §4.1.2,
/// RFC 6066 §3): `Some(None)` when it has none, `None` when the hello is malformed or
/// names more than one host (which no server takes: RFC 6066 allows one of a kind).
fn server_name(hello: &[u8]) -> Option<Option<String>> {
    let mut c = Cursor(hello);
    c.take(2)?; // legacy_version
    c.take(32)?; // random
    c.vec8()?; // legacy_session_id
    c.vec16()?; // cipher_suites
    c.vec8()?; // legacy_compression_methods
    if c.0.is_empty() {
        return Some(None);
    }
    let mut extensions = Cursor(c.vec16()?);
    let mut found = None;
    let mut named = false;
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        if kind != 0 {
            continue;
        }
        if named {
            return None;
        }
        named = true;
        let mut names = Cursor(Cursor(data).vec16()?);
        while !names.0.is_empty() {
            let name_type = names.take(1)?[0];
            let name = names.vec16()?;
            if name_type == 0 {
                if found.is_some() {
                    return None;
                }
                found = Some(String::from_utf8(name.to_vec()).ok()?);
            }
        }
    }
    Some(found)
}

/// Client bytes of a TLS tunnel watched past the first hello before the encrypted part
/// starts: enough for a second `ClientHello` (sent after a server's HelloRetryRequest)
/// and a client certificate.
const MAX_WATCHED: usize = 64 * 1024;

/// Watches a TLS tunnel's client bytes after the first hello passed: a server's
/// HelloRetryRequest has the client send a second `ClientHello` in the clear, which a
/// shared ingress may route by, so it must name the same host as the first. Stops at
/// the first application-data record (from then on all is encrypted), at something
/// that is not a TLS record, or after [`MAX_WATCHED`] bytes. A handshake message that
/// does not read as a whole `ClientHello` is let through (TLS 1.2's encrypted
/// `Finished` travels in a handshake record).
pub(super) struct LaterHellos<'h> {
    host: &'h str,
    pending: Vec<u8>,
    handshake: Vec<u8>,
    seen: usize,
    done: bool,
}

impl<'h> LaterHellos<'h> {
    /// A watch over a tunnel to `host` whose client bytes are all fed from the first.
    pub(super) fn new(host: &'h str) -> Self {
        LaterHellos {
            host,
            pending: Vec::new(),
            handshake: Vec::new(),
            seen: 0,
            done: false,
        }
    }

    /// Whether nothing more is looked at.
    pub(super) fn done(&self) -> bool {
        self.done
    }

    /// Takes the next client bytes; the reason to close the tunnel when a hello names
    /// another host.
    pub(super) fn feed(&mut self, chunk: &[u8]) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        self.seen += chunk.len();
        self.pending.extend_from_slice(chunk);
        let mut at = 0;
        while let Some(header) = self.pending.get(at..at + 5) {
            let (kind, len) = (header[0], usize::from(u16::from_be_bytes([header[3], header[4]])));
            if !(0x14..=0x16).contains(&kind) || header[1] != 0x03 {
                // Application data (encrypted from here on), or not TLS at all.
                self.finish();
                return Ok(());
            }
            let Some(body) = self.pending.get(at + 5..at + 5 + len) else {
                break;
            };
            if kind == 0x16 {
                self.handshake.extend_from_slice(body);
            }
            at += 5 + len;
            self.hellos()?;
        }
        self.pending.drain(..at);
        if self.seen > MAX_WATCHED || self.handshake.len() > MAX_HELLO {
            self.finish();
        }
        Ok(())
    }

    /// Checks each whole handshake message gathered so far that reads as a hello.
    fn hellos(&mut self) -> Result<(), String> {
        while let Some(&[kind, a, b, c]) = self.handshake.get(..4) {
            let end = 4 + (usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c));
            let Some(message) = self.handshake.get(4..end) else {
                return Ok(());
            };
            if kind == 1 {
                match server_name(message) {
                    Some(Some(name)) if !same_host(&name, self.host) => {
                        return Err(format!(
                            "the TLS server name sent through the tunnel is not {}, the host it was opened to",
                            self.host
                        ));
                    }
                    // A hello's legacy_version, yet not a hello that reads (two names,
                    // a name that is not text): refused as a first one would be. An
                    // encrypted `Finished` starts so about once in 2^40.
                    None if message.starts_with(&[0x03, 0x03]) => {
                        return Err("the tunnel's later TLS ClientHello is malformed".into());
                    }
                    _ => {}
                }
            }
            self.handshake.drain(..end);
        }
        Ok(())
    }

    fn finish(&mut self) {
        self.done = true;
        self.pending = Vec::new();
        self.handshake = Vec::new();
    }
}

/// Reads a TLS structure front to back; every read is bounds-checked.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a one-byte length.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.take(1)?[0];
        self.take(usize::from(n))
    }

    /// A vector with a two-byte length.
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The first flight of a real TLS client (rustls) connecting to `name`.
    pub(in crate::http::proxy) fn client_hello(name: &str) -> Vec<u8> {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
        let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
        let mut out = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut out).unwrap();
        }
        out
    }

    /// `flight`'s handshake bytes re-cut into records of at most `size` bytes, as a
    /// client may send them.
    fn fragmented(flight: &[u8], size: usize) -> Vec<u8> {
        let handshake = &flight[5..];
        let mut out = Vec::new();
        for piece in handshake.chunks(size) {
            out.extend_from_slice(&[0x16, 0x03, 0x01]);
            out.extend_from_slice(&(piece.len() as u16).to_be_bytes());
            out.extend_from_slice(piece);
        }
        out
    }

    /// A record of `kind` around `body`.
    fn record(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind, 0x03, 0x03];
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn watched(bytes: &[u8], step: usize) -> (Result<(), String>, bool) {
        let mut hellos = LaterHellos::new("api.example.com");
        for piece in bytes.chunks(step) {
            if let Err(why) = hellos.feed(piece) {
                return (Err(why), hellos.done());
            }
        }
        (Ok(()), hellos.done())
    }

    /// After a HelloRetryRequest, the client's second hello (after a compatibility
    /// ChangeCipherSpec) must name the same host as its first, however the bytes
    /// arrive; encrypted records end the watch, and TLS 1.2's encrypted Finished in a
    /// handshake record is not taken for a hello.
    #[test]
    fn a_later_hello_must_name_the_same_host() {
        let ccs = record(0x14, &[1]);
        let mut retried = client_hello("api.example.com");
        retried.extend_from_slice(&ccs);
        retried.extend_from_slice(&client_hello("evil.example"));
        for step in [1, 7, retried.len()] {
            let (verdict, _) = watched(&retried, step);
            assert!(
                verdict.is_err_and(|why| why.contains("not api.example.com")),
                "step {step}"
            );
        }
        let mut honest = client_hello("api.example.com");
        honest.extend_from_slice(&ccs);
        honest.extend_from_slice(&client_hello("api.example.com"));
        assert_eq!(watched(&honest, 3), (Ok(()), false));
        honest.extend_from_slice(&record(0x17, &[0xab; 40]));
        honest.extend_from_slice(&client_hello("evil.example"));
        assert_eq!(
            watched(&honest, 5),
            (Ok(()), true),
            "encrypted from the first application data"
        );
        // TLS 1.2: ClientKeyExchange, ChangeCipherSpec, then a Finished that is
        // encrypted, here starting with the byte a hello starts with.
        let mut tls12 = client_hello("api.example.com");
        tls12.extend_from_slice(&record(0x16, &[16, 0, 0, 3, 2, 0xaa, 0xbb]));
        tls12.extend_from_slice(&ccs);
        let mut finished = vec![1u8, 0, 0, 36];
        finished.extend_from_slice(&[0x5a; 36]);
        tls12.extend_from_slice(&record(0x16, &finished));
        assert_eq!(watched(&tls12, 11).0, Ok(()));
        // A later hello that does not read (here, cut short inside its extensions) is
        // refused as a first one would be.
        let mut malformed = client_hello("api.example.com");
        malformed.extend_from_slice(&ccs);
        let second = client_hello("api.example.com");
        let mut body = second[5..].to_vec();
        let cut = body.len() - 10;
        body.truncate(cut);
        let len = (cut - 4) as u32;
        body[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
        malformed.extend_from_slice(&record(0x16, &body));
        assert!(
            watched(&malformed, 9)
                .0
                .is_err_and(|why| why.contains("malformed"))
        );
        // Not TLS after all: nothing more is looked at.
        assert_eq!(watched(b"SSH-2.0-x\r\n", 4), (Ok(()), true));
    }

    #[test]
    fn a_client_hello_must_name_the_tunnels_host_or_none() {
        let hello = client_hello("api.example.com");
        assert_eq!(judge(&hello, "api.example.com", 443), First::Pass);
        assert_eq!(
            judge(&hello, "api.example.com.", 443),
            First::Pass,
            "a final dot names the same host"
        );
        let refused = judge(&client_hello("evil.example"), "api.example.com", 443);
        assert_eq!(
            refused,
            First::Refuse(
                "the TLS server name sent through the tunnel is not api.example.com, the host it was opened to"
                    .into()
            )
        );
        // rustls sends no server name for an address (RFC 6066 forbids one).
        let by_address = client_hello("93.184.216.34");
        assert_eq!(judge(&by_address, "93.184.216.34", 443), First::Pass);
        // A name sent to a tunnel opened to an address is another host.
        assert!(matches!(
            judge(&client_hello("evil.example"), "93.184.216.34", 443),
            First::Refuse(_)
        ));
    }

    #[test]
    fn a_client_hello_is_read_whole_across_reads_and_records() {
        let hello = client_hello("api.example.com");
        // Every prefix waits for more; the whole decides.
        for cut in [0, 1, 4, 5, 6, 40, hello.len() - 1] {
            assert_eq!(
                judge(&hello[..cut], "api.example.com", 443),
                First::More,
                "cut at {cut}"
            );
        }
        // One hello split over records of 100 bytes: still read, still checked.
        let split = fragmented(&client_hello("evil.example"), 100);
        assert!(split.len() > hello.len(), "the hello spans several records");
        assert_eq!(
            judge(&split[..split.len() - 1], "api.example.com", 443),
            First::More
        );
        assert!(matches!(judge(&split, "api.example.com", 443), First::Refuse(_)));
        assert_eq!(
            judge(&fragmented(&hello, 100), "api.example.com", 443),
            First::Pass
        );
    }

    #[test]
    fn malformed_or_oversized_handshakes_are_refused() {
        let hello = client_hello("api.example.com");
        // A record that is not a handshake after the first.
        let mut mixed = fragmented(&hello, 100);
        mixed[105] = 0x17;
        assert!(matches!(judge(&mixed, "api.example.com", 443), First::Refuse(_)));
        // A handshake that is not a ClientHello.
        let mut not_hello = hello.clone();
        not_hello[5] = 2;
        assert!(matches!(
            judge(&not_hello, "api.example.com", 443),
            First::Refuse(_)
        ));
        // Extensions whose length runs past the hello.
        let mut at = 5 + 4 + 2 + 32; // record and handshake headers, version, random
        at += 1 + usize::from(hello[at]); // session id
        at += 2 + usize::from(u16::from_be_bytes([hello[at], hello[at + 1]])); // suites
        at += 1 + usize::from(hello[at]); // compression methods
        let mut overlong = hello.clone();
        overlong[at..at + 2].copy_from_slice(&[0xff, 0xff]);
        assert_eq!(
            judge(&overlong, "api.example.com", 443),
            First::Refuse("the tunnel's TLS ClientHello is malformed".into())
        );
        // A hello claiming more than the limit is refused without waiting for it.
        let huge = [0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x01, 0x00, 0x00];
        assert!(matches!(judge(&huge, "api.example.com", 443), First::Refuse(_)));
        // Records that never finish a hello stop at the limit.
        let mut endless = Vec::new();
        endless.extend_from_slice(&[0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x4f, 0x00]);
        while endless.len() < MAX_HELLO {
            endless.extend_from_slice(&[0x16, 0x03, 0x01, 0x00, 0x00]);
        }
        assert!(matches!(
            judge(&endless, "api.example.com", 443),
            First::Refuse(_)
        ));
    }

    #[test]
    fn plain_http_is_refused_and_other_protocols_pass() {
        let host = "api.example.com";
        for request in [
            &b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n"[..],
            b"POST /x HTTP/1.0\n",
            b"get / http/1.1\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"CUSTOMMETHOD /a%20b HTTP/1.1\r\n",
        ] {
            assert!(
                matches!(judge(request, host, 8443), First::Refuse(ref why) if why.starts_with("plain HTTP")),
                "{}",
                String::from_utf8_lossy(request)
            );
        }
        // A request line still arriving waits for its end.
        assert_eq!(judge(b"GET", host, 8443), First::More);
        assert_eq!(judge(b"GET / HTTP/1.", host, 8443), First::More);
        // Other protocols, text or binary, pass at once or at their first line's end.
        assert_eq!(judge(b"SSH-2.0-OpenSSH_9.6\r\n", host, 8443), First::Pass);
        assert_eq!(judge(b"EHLO client.example\r\n", host, 8443), First::Pass);
        assert_eq!(judge(b"*1\r\n$4\r\nPING\r\n", host, 8443), First::Pass);
        assert_eq!(judge(&[0, 0, 0, 8, 4, 210, 22, 47], host, 8443), First::Pass);
        // A first line too long to check is refused rather than passed unread.
        let mut long = b"GET /".to_vec();
        long.resize(MAX_LINE, b'a');
        assert!(matches!(judge(&long, host, 8443), First::Refuse(_)));
        assert!(matches!(
            judge(&vec![b'A'; MAX_LINE], host, 8443),
            First::Refuse(_)
        ));
        // Request lines servers take though they bend the form: blank lines first, a
        // blank after the version, tabs, no version with a path or URL (HTTP/0.9).
        for request in [
            &b"\r\nGET / HTTP/1.1\r\nHost: evil.example\r\n\r\n"[..],
            b"\n\n\nGET / HTTP/1.1\r\n",
            b"GET / HTTP/1.1 \r\n",
            b"GET\t/\tHTTP/1.1\r\n",
            b"GET http://evil.example/?d=1\r\n",
            b"GET /\r\n",
            b"OPTIONS *\r\n",
        ] {
            assert!(
                matches!(judge(request, host, 8443), First::Refuse(ref why) if why.starts_with("plain HTTP")),
                "{}",
                String::from_utf8_lossy(request)
            );
        }
        assert_eq!(judge(b"\r\n\r\n", host, 8443), First::More);
        assert!(matches!(
            judge(b"PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n", host, 8443),
            First::Refuse(ref why) if why.contains("PROXY")
        ));
    }

    /// To ports 80 and 443 a tunnel carries TLS and nothing else, and any TLS record
    /// first counts as TLS: an alert before the hello cannot take it past the check.
    #[test]
    fn web_ports_carry_tls_only_and_a_leading_record_cannot_skip_the_hello() {
        let host = "api.example.com";
        for port in [80, 443] {
            for start in [
                &b"SSH-2.0-x\r\n"[..],
                b"EHLO x\r\n",
                &[0u8, 0, 0, 8],
                &[0x80, 0x2e, 0x01],
            ] {
                assert!(
                    matches!(judge(start, host, port), First::Refuse(ref why) if why.contains("carries TLS only")),
                    "{port}: {start:?}"
                );
            }
        }
        // A warning alert, then a hello naming another host.
        let mut alerted = vec![0x15, 0x03, 0x01, 0x00, 0x02, 0x01, 0x5a];
        alerted.extend_from_slice(&client_hello("evil.example"));
        assert_eq!(
            judge(&alerted, host, 443),
            First::Refuse("the tunnel's TLS handshake is malformed".into())
        );
        // The same after a ChangeCipherSpec, on another port too.
        let mut ccs = vec![0x14, 0x03, 0x03, 0x00, 0x01, 0x01];
        ccs.extend_from_slice(&client_hello("evil.example"));
        assert!(matches!(judge(&ccs, host, 8443), First::Refuse(_)));
    }

    /// A hello carrying an Encrypted Client Hello extension passes on its outer name
    /// (browsers send a decoy one to every site); a hello naming two hosts is refused;
    /// a binary protocol whose first byte is a TLS record type is not taken for TLS.
    #[test]
    fn ech_passes_on_its_outer_name_two_names_are_refused_and_binary_starts_pass() {
        let hello = client_hello("api.example.com");
        let mut at = 5 + 4 + 2 + 32;
        at += 1 + usize::from(hello[at]);
        at += 2 + usize::from(u16::from_be_bytes([hello[at], hello[at + 1]]));
        at += 1 + usize::from(hello[at]);
        // Appends `extension` and fixes the record, handshake and extensions lengths.
        let with = |extension: &[u8]| {
            let mut out = hello.clone();
            out.extend_from_slice(extension);
            let grow = |bytes: &mut [u8]| {
                let n = usize::from(u16::from_be_bytes([bytes[0], bytes[1]])) + extension.len();
                bytes.copy_from_slice(&(n as u16).to_be_bytes());
            };
            grow(&mut out[3..5]);
            grow(&mut out[7..9]);
            grow(&mut out[at..at + 2]);
            out
        };
        let ech = with(&[0xfe, 0x0d, 0x00, 0x04, 0, 0, 0, 0]);
        assert_eq!(judge(&ech, "api.example.com", 443), First::Pass);
        // A second server_name extension naming another host.
        let mut second = vec![0x00, 0x00, 0x00, 0x11, 0x00, 0x0f, 0x00, 0x00, 0x0c];
        second.extend_from_slice(b"evil.example");
        assert_eq!(
            judge(&with(&second), "api.example.com", 443),
            First::Refuse("the tunnel's TLS ClientHello is malformed".into())
        );
        // MongoDB's first bytes are a little-endian length, here 0x16 bytes long.
        assert_eq!(
            judge(&[0x16, 0x00, 0x00, 0x00, 0x01], "db.example.com", 27017),
            First::Pass
        );
        assert_eq!(judge(&[0x16], "db.example.com", 27017), First::More);
    }
}
