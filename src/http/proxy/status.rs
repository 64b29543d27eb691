//! The status of a plain response, for the record, read as the response passes:
//! informational heads (`100 Continue`, `103 Early Hints`) come before the final one
//! and are skipped, and a status line split across reads is still read.

/// Bytes of heads kept while looking for the final status; past it, the last status
/// seen stands.
const MAX_HEADS: usize = 64 * 1024;

/// Follows a response's first bytes to its final status.
#[derive(Default)]
pub(super) struct StatusWatch {
    heads: Vec<u8>,
    /// How much of `heads` was searched for a head's end already (a response sent a
    /// byte a read is not searched again from its start each time).
    searched: usize,
    status: Option<u16>,
    done: bool,
}

impl StatusWatch {
    /// Takes the next bytes of the response (they pass on unchanged elsewhere).
    pub(super) fn feed(&mut self, chunk: &[u8]) {
        if self.done {
            return;
        }
        self.heads.extend_from_slice(chunk);
        loop {
            // A head's end is at most 4 bytes long: it may begin just before the new ones.
            let from = self.searched.saturating_sub(3);
            let Some(end) = head_end(&self.heads[from..]).map(|e| e + from) else {
                self.searched = self.heads.len();
                break;
            };
            let code = status_code(&self.heads[..end]);
            self.heads.drain(..end);
            self.searched = 0;
            self.status = code.or(self.status);
            // 101 Switching Protocols is final: what follows is another protocol.
            if !code.is_some_and(|c| (100..200).contains(&c) && c != 101) {
                self.done = true;
                self.heads = Vec::new();
                return;
            }
        }
        if self.heads.len() > MAX_HEADS {
            self.status = status_code(&self.heads).or(self.status);
            self.done = true;
            self.heads = Vec::new();
        }
    }

    /// Whether the final status is known (or no longer looked for).
    pub(super) fn done(&self) -> bool {
        self.done
    }

    /// The final status, or the last one seen when the response ended early.
    pub(super) fn status(&self) -> Option<u16> {
        self.status
    }
}

/// Where the first head in `bytes` ends (after its blank line), if it has.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The code of a status line `HTTP/x.y NNN reason` at the start of `head`.
fn status_code(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.trim_end_matches('\r').split(' ');
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next().filter(|c| c.len() == 3).and_then(|c| c.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(chunks: &[&[u8]]) -> (Option<u16>, bool) {
        let mut watch = StatusWatch::default();
        for chunk in chunks {
            watch.feed(chunk);
        }
        (watch.status(), watch.done())
    }

    #[test]
    fn the_final_status_is_read_past_informational_heads_and_split_reads() {
        assert_eq!(
            watched(&[b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody"]),
            (Some(200), true)
        );
        assert_eq!(
            watched(&[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n\r\n"]),
            (Some(201), true)
        );
        assert_eq!(
            watched(&[
                b"HTTP/1.1 100 Continue\r\n\r\n",
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
                b"HTTP/1.1 404 Not Found\r\n\r\n"
            ]),
            (Some(404), true)
        );
        assert_eq!(
            watched(&[b"HT", b"TP/1.1 2", b"04 No Content\r", b"\n\r\n"]),
            (Some(204), true)
        );
        assert_eq!(
            watched(&[b"HTTP/1.1 101 Switching Protocols\r\n\r\n"]),
            (Some(101), true)
        );
        // Ended after the interim answer only: that is what was seen.
        assert_eq!(watched(&[b"HTTP/1.1 100 Continue\r\n\r\n"]), (Some(100), false));
        // Not HTTP: no status, and nothing more is looked for.
        assert_eq!(watched(&[b"SSH-2.0-OpenSSH\r\n\r\n"]), (None, true));
        let endless = vec![b'x'; MAX_HEADS + 1];
        assert_eq!(watched(&[b"HTTP/1.1 200 OK\r\n", &endless]), (Some(200), true));
    }
}
