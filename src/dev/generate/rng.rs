//! [`Rng`]: the generator's seeded random stream (xoshiro256**), defined here so the output
//! never changes with a dependency's version.

use alloy_primitives::keccak256;

/// A xoshiro256** generator (Blackman and Vigna), seeded from keccak256 of a label and the seed.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A stream for `seed`; `label` separates independent streams of one seed.
    pub(crate) fn new(seed: u64, label: &str) -> Self {
        let mut input = Vec::with_capacity(8 + label.len());
        input.extend_from_slice(&seed.to_be_bytes());
        input.extend_from_slice(label.as_bytes());
        let h = keccak256(&input);
        let mut s = [0u64; 4];
        for (word, chunk) in s.iter_mut().zip(h.0.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *word = u64::from_le_bytes(b);
        }
        if s == [0; 4] {
            // The one state xoshiro cannot leave; keccak will not produce it, but be safe.
            s[0] = 1;
        }
        Self { s }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (`n > 0`; 0 when `n == 0`), without modulo bias (Lemire's method).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            let low = m as u64;
            if low >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in `lo..=hi` (`lo <= hi`).
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// An index into a slice of `len` elements (`len > 0`).
    pub(crate) fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn same_seed_same_stream_and_bounds_hold() {
        let (mut a, mut b, mut c) = (Rng::new(7, "x"), Rng::new(7, "x"), Rng::new(7, "y"));
        let xs: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        for _ in 0..1000 {
            assert!(a.below(10) < 10);
            let r = a.range(5, 9);
            assert!((5..=9).contains(&r));
        }
        assert_eq!(a.range(3, 3), 3);
    }
}
