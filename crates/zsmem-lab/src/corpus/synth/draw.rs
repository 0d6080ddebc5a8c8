//! Skewed random draws: a normal variate, a Zipf-like index, a pick from a list.

use rand::Rng;

/// The corpus's generator. rand_chacha promises that its ChaCha generators
/// give the same stream for the same seed in every release, which rand
/// does not promise for `CorpusRng` (today the same ChaCha12, which is why the
/// switch left the corpus unchanged; `tests/corpus.rs` pins a checksum).
pub(super) type CorpusRng = rand_chacha::ChaCha12Rng;

pub(super) fn normal(r: &mut CorpusRng) -> f64 {
    // Box-Muller: rand 0.9 alone has no normal distribution.
    let u1: f64 = r.random_range(f64::EPSILON..1.0);
    let u2: f64 = r.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Skewed index into a list of `n`: small indices are much likelier.
#[inline]
pub(super) fn zipf(r: &mut CorpusRng, n: usize, skew: i32) -> usize {
    let u: f64 = r.random();
    ((u.powi(skew) * n as f64) as usize).min(n - 1)
}

#[inline]
pub(super) fn pick<'a>(r: &mut CorpusRng, list: &[&'a str], skew: i32) -> &'a str {
    list[zipf(r, list.len(), skew)]
}

pub(super) fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
