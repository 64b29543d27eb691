//! PDF's `ASCII85Decode` as a reader, for the extraction pre-scan: lopdf decodes
//! ASCII85 before the filters after it (`[/ASCII85Decode /FlateDecode]`), so a
//! decompression bomb can hide behind it. Read lazily, it never holds more than one
//! group; it reads as lopdf does (whitespace skipped, `z` for four zero bytes at a
//! group's start, `~` or any other byte outside `!`..`u` ends it, a last partial group
//! padded with `u`).

use std::io::Read;

/// The bytes ASCII85 text `data` decodes to, as they are read.
pub struct Ascii85<'a> {
    data: &'a [u8],
    at: usize,
    group: [u8; 4],
    group_len: usize,
    group_at: usize,
    done: bool,
}

impl<'a> Ascii85<'a> {
    pub fn new(data: &'a [u8]) -> Ascii85<'a> {
        Ascii85 {
            data,
            at: 0,
            group: [0; 4],
            group_len: 0,
            group_at: 0,
            done: false,
        }
    }

    /// Decodes the next group into `group`; at the end, marks the reader done.
    fn next_group(&mut self) {
        let mut value: u32 = 0;
        let mut count = 0;
        while let Some(&c) = self.data.get(self.at) {
            if c.is_ascii_whitespace() {
                self.at += 1;
                continue;
            }
            if c == b'z' && count == 0 {
                self.at += 1;
                self.group = [0; 4];
                (self.group_len, self.group_at) = (4, 0);
                return;
            }
            if !(b'!'..=b'u').contains(&c) {
                break;
            }
            self.at += 1;
            // Overflow means the text is not ASCII85 (lopdf fails it): end here.
            let Some(v) = value
                .checked_mul(85)
                .and_then(|v| v.checked_add(u32::from(c - b'!')))
            else {
                self.done = true;
                return;
            };
            value = v;
            count += 1;
            if count == 5 {
                self.group = value.to_be_bytes();
                (self.group_len, self.group_at) = (4, 0);
                return;
            }
        }
        self.done = true;
        if count > 1 {
            for _ in count..5 {
                value = value.wrapping_mul(85).wrapping_add(84);
            }
            self.group = value.to_be_bytes();
            (self.group_len, self.group_at) = (count - 1, 0);
        }
    }
}

impl Read for Ascii85<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            if self.group_at < self.group_len {
                buf[n] = self.group[self.group_at];
                self.group_at += 1;
                n += 1;
                continue;
            }
            if self.done {
                break;
            }
            self.next_group();
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(text: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Ascii85::new(text).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn decodes_as_pdf_readers_do() {
        // "Man " and "sure." from the ASCII85 examples; `z` is four zero bytes.
        assert_eq!(decoded(b"9jqo^"), b"Man ");
        assert_eq!(decoded(b"F*2M7/c~>"), b"sure.");
        assert_eq!(decoded(b"9jqo^ z\n9jqo^~>"), b"Man \0\0\0\0Man ");
        assert_eq!(decoded(b"endstream"), decoded(b"endstream"));
        assert!(decoded(b"\x00binary").is_empty());
    }
}
