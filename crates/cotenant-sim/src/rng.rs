//! The simulator's and the lab's pseudo-random numbers: SplitMix64 (Steele, Lea and Flood,
//! 2014), a well-known 64-bit generator. Runs must be reproducible from a seed across
//! platforms and crate versions, which a 10-line generator guarantees and a dependency's
//! "small RNG" does not promise; statistical quality beyond that is not needed here.

/// SplitMix64: the same seed gives the same sequence everywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// A generator for stream `stream` of `seed` (one per process, per CPU, ...), so that
    /// adding a stream does not shift the numbers of the others.
    pub fn stream(seed: u64, stream: u64) -> Self {
        let mut mixer = SplitMix64(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        SplitMix64(mixer.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..bound` (`bound` > 0; 0 gives 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            // Multiply-shift: unbiased enough for phases and offsets (bias < bound / 2^64).
            ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
        }
    }

    /// An exponentially distributed gap with mean `mean` (inverse transform, U in (0, 1]).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -(1.0 - self.next_f64()).ln() * mean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference values of SplitMix64 seeded with 1234567 (from the algorithm's published
    /// C code, `splitmix64.c`).
    #[test]
    fn matches_the_reference_sequence() {
        let mut rng = SplitMix64::new(1_234_567);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(first, [6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423]);
    }

    #[test]
    fn streams_differ_and_repeat() {
        let a: Vec<u64> = (0..4).map(|s| SplitMix64::stream(7, s).next_u64()).collect();
        let b: Vec<u64> = (0..4).map(|s| SplitMix64::stream(7, s).next_u64()).collect();
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 4);
    }

    #[test]
    fn below_and_exponential_stay_in_range() {
        let mut rng = SplitMix64::new(3);
        assert!((0..1000).all(|_| rng.below(10) < 10));
        assert_eq!(rng.below(0), 0);
        let mean = (0..20_000).map(|_| rng.exponential(2.0)).sum::<f64>() / 20_000.0;
        assert!((mean - 2.0).abs() < 0.1, "{mean}");
    }
}
