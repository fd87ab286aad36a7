//! The hash of the route table's maps. A lookup hashes the request's host and each of its path
//! segments; the keys are short strings, and SipHash (std's default) costs more than the rest
//! of the lookup together. This is a multiply-and-add hash over 8-byte words (the scheme of
//! rustc's FxHash, with a rotation at the end so the well-mixed high bits pick the bucket),
//! seeded per table from std's `RandomState`: the bucket layout differs from one table (and
//! process) to the next, so nobody can prepare host names that collide. The keys come from
//! the configuration anyway; a client only ever probes.

use std::hash::{BuildHasher, Hasher};

/// rustc-hash's multiplier (an odd constant with well-spread bits).
const MULTIPLIER: u64 = 0xf135_7aea_2e62_a9c5;

/// Builds [`KeyHasher`]s with one random seed.
#[derive(Debug, Clone, Copy)]
pub struct KeyHash {
    seed: u64,
}

impl Default for KeyHash {
    fn default() -> Self {
        KeyHash {
            seed: std::collections::hash_map::RandomState::new().hash_one(0x6c37_u16),
        }
    }
}

impl BuildHasher for KeyHash {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher { state: self.seed }
    }
}

/// One hash computation (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct KeyHasher {
    state: u64,
}

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.state = self.state.wrapping_add(word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for chunk in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length keeps "a" and "a\0" apart.
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.state.rotate_left(26)
    }
}
