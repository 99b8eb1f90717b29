//! A hash map for the hot loops over sacct's answers (column names, job ids, node and state
//! names: ~50 lookups per line of a million-job window), where SipHash's per-key set-up
//! dominates. FNV-1a: fast on short keys; the keys come from sacct's output, and a crafted
//! collision could only slow a user's own history down, never change its result.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A [`HashMap`] hashed with [`Fnv`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// FNV-1a, 64-bit.
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_fnv_1a() {
        // The published FNV-1a 64 test vectors.
        let h = |s: &str| {
            let mut f = Fnv::default();
            f.write(s.as_bytes());
            f.finish()
        };
        assert_eq!(h(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(h("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(h("foobar"), 0x8594_4171_f739_67e8);
        let mut m: FastMap<String, u32> = FastMap::default();
        m.insert("JobID".into(), 1);
        assert_eq!(m.get("JobID"), Some(&1));
    }
}
