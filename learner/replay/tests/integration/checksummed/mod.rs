//! Items that carry a checksum of their own contents, so a test can tell a
//! whole item from a torn one (shared by the replay stress and checkpoint
//! tests).

/// Words in a payload.
pub const WORDS: usize = 16;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Payload for `id`: the id, words derived from it, then a checksum of all.
pub fn payload(id: u64) -> [u64; WORDS] {
    let mut p = [0u64; WORDS];
    p[0] = id;
    for (i, w) in p.iter_mut().enumerate().take(WORDS - 1).skip(1) {
        *w = mix(id.wrapping_add(i as u64));
    }
    p[WORDS - 1] = p[..WORDS - 1].iter().fold(0, |a, &w| mix(a ^ w));
    p
}
