//! Tile sizes: perfect factorizations of an extent, drawn uniformly, with the innermost part
//! bounded and moved towards whole vectors.

use rand::Rng;

/// Innermost tile factors stay at or below this (Ansor's `max_innermost_split_factor`).
pub const MAX_INNERMOST: i64 = 64;

/// Prime factors with multiplicity, ascending.
pub fn prime_factors(mut n: i64) -> Vec<i64> {
    let mut out = vec![];
    let mut p = 2;
    while p * p <= n {
        while n % p == 0 {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// A factorization of `extent` into `parts` ordered factors, uniform over all of them (each
/// prime's exponent is spread by a uniform composition), redrawn while the innermost factor
/// exceeds `max_inner`.
pub fn sample_factorization<R: Rng>(
    rng: &mut R,
    extent: i64,
    parts: usize,
    max_inner: i64,
) -> Vec<i64> {
    let primes = prime_factors(extent.max(1));
    let mut groups: Vec<(i64, usize)> = vec![];
    for p in primes {
        match groups.last_mut() {
            Some((q, e)) if *q == p => *e += 1,
            _ => groups.push((p, 1)),
        }
    }
    let mut f = vec![1i64; parts];
    for _ in 0..32 {
        f = vec![1; parts];
        for &(p, e) in &groups {
            // A uniform composition of e into `parts` non-negative parts: choose parts - 1 bar
            // positions among e + parts - 1 slots.
            let slots = e + parts - 1;
            let mut bars: Vec<usize> = rand::seq::index::sample(rng, slots, parts - 1).into_vec();
            bars.sort_unstable();
            let mut prev = 0;
            for (k, &b) in bars.iter().chain(std::iter::once(&slots)).enumerate() {
                let count = b - prev;
                f[k] *= p.pow(count as u32);
                prev = b + 1;
            }
        }
        if f[parts - 1] <= max_inner {
            return f;
        }
    }
    // Move factors out of the innermost level until it fits.
    while f[parts - 1] > max_inner {
        let p = prime_factors(f[parts - 1])[0];
        f[parts - 1] /= p;
        f[0] *= p;
    }
    f
}

/// Moves factors of the outer levels of `f` (innermost first) into its innermost length until
/// that is a multiple of `lanes`, within [`MAX_INNERMOST`]; stops where the extent cannot give
/// more. A deterministic function of the drawn factorization, so replays agree.
pub(super) fn whole_vectors(f: &mut [i64], lanes: i64) {
    let inner = f.len() - 1;
    let mut need = lanes.max(1);
    let mut have = f[inner];
    // The part of `lanes` the innermost length lacks.
    for p in prime_factors(lanes.max(1)) {
        if have % p == 0 {
            have /= p;
            need /= p;
        }
    }
    for p in prime_factors(need) {
        let Some(l) = (0..inner).rev().find(|&l| f[l] % p == 0) else {
            return;
        };
        if f[inner] * p > MAX_INNERMOST {
            return;
        }
        f[l] /= p;
        f[inner] *= p;
    }
}

/// Where [`whole_vectors`] cannot make the innermost length of `f` a multiple of `lanes` (a
/// 28-wide output row on 16 lanes), moves the smallest factors of the outer levels (innermost
/// first) into it until it holds at least one whole vector, within [`MAX_INNERMOST`]: the code
/// generator's register tiles end such a loop in a masked partial vector, at 28 of 32 lanes
/// where the 4 columns left by `whole_vectors` filled a quarter of one. An extent shorter
/// than a vector goes whole innermost: a part of it fills fewer lanes still, and a whole
/// row is what the code generator packs into the lanes beside the next rows
/// (`codegen::rows`). Deterministic in the drawn factors, as `whole_vectors`.
pub(super) fn at_least_one_vector(f: &mut [i64], lanes: i64) {
    let inner = f.len() - 1;
    let extent: i64 = f.iter().product();
    if extent < lanes {
        if extent <= MAX_INNERMOST {
            f.fill(1);
            f[inner] = extent;
        }
        return;
    }
    while f[inner] < lanes {
        let Some((l, p)) = (0..inner)
            .rev()
            .find_map(|l| prime_factors(f[l]).first().map(|&p| (l, p)))
        else {
            return;
        };
        if f[inner] * p > MAX_INNERMOST {
            return;
        }
        f[l] /= p;
        f[inner] *= p;
    }
}

/// The factorizations of `extent` into `parts` ordered factors whose innermost is at most
/// `max_inner`, outermost first: what a tile decision may hold (recovering decisions tries
/// each). Stops once it has more than `limit`, so that a caller can refuse an extent with too
/// many without listing them all.
pub fn factorizations(extent: i64, parts: usize, max_inner: i64, limit: usize) -> Vec<Vec<i64>> {
    struct Walk {
        max_inner: i64,
        limit: usize,
        out: Vec<Vec<i64>>,
    }
    fn go(w: &mut Walk, rest: i64, parts: usize, prefix: &mut Vec<i64>) {
        if w.out.len() > w.limit {
            return;
        }
        if parts == 1 {
            if rest <= w.max_inner {
                prefix.push(rest);
                w.out.push(prefix.clone());
                prefix.pop();
            }
            return;
        }
        let small = (1..)
            .take_while(|d| d * d <= rest)
            .filter(|d| rest % d == 0);
        let mut divisors: Vec<i64> = small.flat_map(|d| [d, rest / d]).collect();
        divisors.sort_unstable();
        divisors.dedup();
        for d in divisors {
            prefix.push(d);
            go(w, rest / d, parts - 1, prefix);
            prefix.pop();
        }
    }
    let mut w = Walk {
        max_inner,
        limit,
        out: vec![],
    };
    if parts > 0 && extent > 0 {
        go(&mut w, extent, parts, &mut vec![]);
    }
    w.out
}
