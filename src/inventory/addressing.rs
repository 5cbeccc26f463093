//! Path addresses (MLT §4.2.1 source routing, XPath style): how `fabric.path_pool` is
//! carved. Validation checks that the pool holds the layout; the plan assigns from it.
//!
//! Every host owns one address per spine its rack reaches. The pool is cut into one
//! equal, aligned part per spine; each part into one block per rack; each block holds
//! the rack's hosts at offsets 1, 2, …. A leaf routes spine s's whole part via s, spine
//! s routes block (s, r) to rack r's leaf, and that leaf routes each address to its
//! host — so the destination address alone picks the spine a packet crosses, and a leaf
//! needs one route per spine rather than one per spine and rack.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// Where each (spine, rack, host slot) address lies in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathLayout {
    pool: Ipv4Net,
    block_bits: u8,
    spine_stride: u64,
}

impl PathLayout {
    /// The layout for `racks` racks of at most `hosts_per_rack` hosts each.
    pub fn new(pool: Ipv4Net, racks: usize, hosts_per_rack: usize) -> Self {
        // Offset 0 of a block stays unused so no host gets a block's network address.
        let block = (hosts_per_rack as u64 + 1).next_power_of_two();
        let block_bits = block.trailing_zeros() as u8;
        let spine_stride = (racks.max(1) as u64).next_power_of_two() << block_bits;
        PathLayout {
            pool,
            block_bits,
            spine_stride,
        }
    }

    /// Addresses the layout needs for `spines` spines.
    pub fn needed(&self, spines: usize) -> u64 {
        spines as u64 * self.spine_stride
    }

    /// Addresses the pool holds.
    pub fn capacity(&self) -> u64 {
        1u64 << (32 - self.pool.prefix_len())
    }

    /// The smallest prefix length of a pool that fits `spines` spines.
    pub fn largest_prefix_len(&self, spines: usize) -> u8 {
        let needed = self.needed(spines).max(1).next_power_of_two();
        32 - needed.trailing_zeros() as u8
    }

    /// Spine `spine`'s part of the pool: every rack's block behind that spine.
    pub fn part(&self, spine: usize) -> Ipv4Net {
        let base = self.offset(spine, 0, 0);
        let len = 32 - self.spine_stride.trailing_zeros() as u8;
        Ipv4Net::new(base, len).expect("a part is an aligned power of two")
    }

    /// Block of rack `rack`'s addresses behind spine `spine`.
    pub fn block(&self, spine: usize, rack: usize) -> Ipv4Net {
        let base = self.offset(spine, rack, 0);
        Ipv4Net::new(base, 32 - self.block_bits).expect("block prefix is at most 32")
    }

    /// Address of the host in slot `slot` (its position within its rack) via `spine`.
    pub fn address(&self, spine: usize, rack: usize, slot: usize) -> Ipv4Addr {
        self.offset(spine, rack, slot as u64 + 1)
    }

    fn offset(&self, spine: usize, rack: usize, within: u64) -> Ipv4Addr {
        let base = u64::from(u32::from(self.pool.network()));
        let at =
            base + spine as u64 * self.spine_stride + ((rack as u64) << self.block_bits) + within;
        Ipv4Addr::from(at as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_and_disjoint() {
        let pool: Ipv4Net = "10.200.0.0/16".parse().unwrap();
        let layout = PathLayout::new(pool, 3, 2);
        // 2 hosts + unused offset 0 -> blocks of 4; 3 racks -> spine parts of 16.
        assert_eq!(layout.block(0, 0).to_string(), "10.200.0.0/30");
        assert_eq!(layout.block(0, 2).to_string(), "10.200.0.8/30");
        assert_eq!(layout.block(1, 0).to_string(), "10.200.0.16/30");
        assert_eq!(layout.part(0).to_string(), "10.200.0.0/28");
        assert_eq!(layout.part(1).to_string(), "10.200.0.16/28");
        assert!(layout.part(1).contains(&layout.block(1, 2)));
        assert_eq!(layout.address(1, 2, 1), Ipv4Addr::new(10, 200, 0, 26));
        assert_eq!(layout.needed(2), 32);
        assert_eq!(layout.largest_prefix_len(2), 27);
        assert_eq!(layout.capacity(), 65536);
        let mut blocks = Vec::new();
        for s in 0..2 {
            for r in 0..3 {
                let b = layout.block(s, r);
                assert!(pool.contains(&b));
                for slot in 0..2 {
                    assert!(b.contains(&layout.address(s, r, slot)));
                }
                blocks.push(b);
            }
        }
        for (i, a) in blocks.iter().enumerate() {
            for b in &blocks[i + 1..] {
                assert!(!a.contains(b) && !b.contains(a), "{a} overlaps {b}");
            }
        }
    }

    #[test]
    fn large_fabric_fits_a_slash_16() {
        let pool: Ipv4Net = "10.128.0.0/16".parse().unwrap();
        let layout = PathLayout::new(pool, 64, 32);
        assert_eq!(layout.needed(16), 65536);
        assert_eq!(layout.block(15, 63).to_string(), "10.128.255.192/26");
    }
}
