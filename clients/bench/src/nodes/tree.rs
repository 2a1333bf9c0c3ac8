//! The relays of a `bench nodes --fanout K` run: real exec services
//! (`fluxgate-exec --relay --virtual 0`) in levels, each carrying the joins
//! of at most K below it, so that the job manager holds at most K streams.

/// Relays per level, top (joined to the job manager) first; none when the
/// job manager can take every node itself (`fanout` 0, or no more nodes
/// than `fanout`).
pub fn levels(nodes: u32, fanout: u32) -> Vec<u32> {
    let mut levels = Vec::new();
    if fanout == 0 {
        return levels;
    }
    let mut count = nodes;
    while count > fanout {
        count = count.div_ceil(fanout);
        levels.push(count);
    }
    levels.reverse();
    levels
}

/// A loopback address for a relay to listen on.
pub fn free_addr() -> anyhow::Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_keep_every_parent_within_the_fanout() {
        assert_eq!(levels(16384, 0), Vec::<u32>::new());
        assert_eq!(levels(100, 128), Vec::<u32>::new());
        assert_eq!(levels(16384, 128), vec![128]);
        assert_eq!(levels(65536, 256), vec![256]);
        assert_eq!(levels(16384, 16), vec![4, 64, 1024]);
        assert_eq!(levels(65537, 256), vec![2, 257]);
    }
}
