//! `TCP_NODELAY` on PostgreSQL connections. sqlx 0.9.0 stopped setting it (sqlx issue
//! #4335; the fix, PR #4336, is merged but not released): a statement sent as several
//! small writes then waits for the server's delayed ACK, about 40 ms per group commit
//! against 0.3 ms without. Until a release sets it again, each new pool connection sets
//! it on this process's TCP sockets connected to the database's port. Setting it on a
//! socket that already has it, or on another socket to that port, is harmless.

/// Sets `TCP_NODELAY` on every TCP socket of this process whose peer port is `port`;
/// how many it set.
#[cfg(target_os = "linux")]
pub fn set_on_sockets_to(port: u16) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let mut set = 0;
    for entry in dir.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // Only sockets: their link reads `socket:[inode]`.
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if is_socket && peer_port(fd) == Some(port) && nodelay(fd) {
            set += 1;
        }
    }
    set
}

/// Elsewhere nothing is set (the stall is the same, but steward is deployed on Linux).
#[cfg(not(target_os = "linux"))]
pub fn set_on_sockets_to(_port: u16) -> usize {
    0
}

/// The peer port of socket `fd`, if it is an IPv4 or IPv6 socket with a peer.
#[cfg(target_os = "linux")]
fn peer_port(fd: i32) -> Option<u16> {
    // SAFETY: `storage` is a zeroed sockaddr_storage, large enough for any address, and
    // `len` says its size; getpeername writes at most that much and fails cleanly on a
    // descriptor that is not a connected socket (or was closed meanwhile).
    let (storage, len) = unsafe {
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let rc = libc::getpeername(fd, (&raw mut storage).cast::<libc::sockaddr>(), &mut len);
        if rc != 0 {
            return None;
        }
        (storage, len as usize)
    };
    match i32::from(storage.ss_family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, of the size checked.
            let v4 = unsafe { &*(&raw const storage).cast::<libc::sockaddr_in>() };
            Some(u16::from_be(v4.sin_port))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for a sockaddr_in6.
            let v6 = unsafe { &*(&raw const storage).cast::<libc::sockaddr_in6>() };
            Some(u16::from_be(v6.sin6_port))
        }
        _ => None,
    }
}

/// Sets `TCP_NODELAY` on `fd`; whether it took.
#[cfg(target_os = "linux")]
fn nodelay(fd: i32) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: a plain setsockopt with a pointer to an int that outlives the call; on a
    // socket that is not TCP it fails and changes nothing.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&raw const on).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn has_nodelay(fd: i32) -> bool {
        let mut on: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&raw mut on).cast::<libc::c_void>(),
                &mut len,
            )
        };
        rc == 0 && on != 0
    }

    #[test]
    fn sockets_to_the_port_get_nodelay_and_others_do_not() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to_db = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let to_other = std::net::TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!has_nodelay(to_db.as_raw_fd()));
        let port = listener.local_addr().unwrap().port();
        assert!(set_on_sockets_to(port) >= 1);
        assert!(has_nodelay(to_db.as_raw_fd()));
        assert!(!has_nodelay(to_other.as_raw_fd()));
    }
}
