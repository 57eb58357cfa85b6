//! xxh3, the digest of records (their identity), of written rollouts and files (the
//! manifest), and of keys (shards, batches): twox-hash's, because it picks its AVX2 loop at
//! run time when the CPU has one (figures: samples/BENCHMARKS.md, "The figures the README
//! links to"). Any xxh3-128 gives the same digests, which are on disk in every home.

/// xxh3-128 of `bytes`.
#[inline]
pub(crate) fn xxh3_128(bytes: &[u8]) -> u128 {
    twox_hash::XxHash3_128::oneshot(bytes)
}

/// xxh3-64 of `bytes`.
#[inline]
pub(crate) fn xxh3_64(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// xxh3-128 of bytes given in pieces (a file read in blocks).
#[derive(Clone, Default)]
pub(crate) struct Xxh3(twox_hash::XxHash3_128);

impl Xxh3 {
    pub(crate) fn new() -> Xxh3 {
        Xxh3(twox_hash::XxHash3_128::new())
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// The digest of every piece so far.
    pub(crate) fn digest128(&self) -> u128 {
        self.0.finish_128()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digests are xxh3's, as on disk in every manifest and session id: xxHash's reference
    /// values for the empty input and `abc`, and xxhash-rust's at lengths where XXH3 changes
    /// its method (17-128, 129-240, longer than a stripe, longer than a block). Given in
    /// pieces, a digest is the one of the whole.
    #[test]
    fn digests_are_xxh3s_whole_or_in_pieces() {
        let bytes: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(xxh3_64(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(xxh3_128(b""), 0x99aa_06d3_0147_98d8_6001_c324_468d_497f);
        assert_eq!(xxh3_64(b"abc"), 0x78af_5f94_892f_3950);
        let reference: [(usize, u128, u64); 5] = [
            (17, 0xdb7e8f77961e47fd878751509ecfdb8b, 0x47aad6b375eb4bba),
            (129, 0x522c922743fd67f1b8075934107218e5, 0x9e2414800f83768a),
            (241, 0x50b62ee1ee6455a7bc424a2c480dd281, 0xbc424a2c480dd281),
            (1025, 0xd1ad5f4a3cce4374fe08e5a874d23fd2, 0xfe08e5a874d23fd2),
            (5000, 0x971956c2a9ecb28a853377ef13cec7bd, 0x853377ef13cec7bd),
        ];
        for (len, digest128, digest64) in reference {
            assert_eq!(xxh3_128(&bytes[..len]), digest128, "{len}");
            assert_eq!(xxh3_64(&bytes[..len]), digest64, "{len}");
        }
        for len in [
            0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 4999, 5000,
        ] {
            let whole = xxh3_128(&bytes[..len]);
            let mut pieces = Xxh3::new();
            for piece in bytes[..len].chunks(7 + len / 3) {
                pieces.update(piece);
            }
            assert_eq!(pieces.digest128(), whole, "{len}");
        }
    }
}
