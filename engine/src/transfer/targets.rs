//! Reuse across targets: how near one device description is to another, to choose whose cost
//! model a target with none of its own starts from.
//!
//! The order is lexicographic, most telling first: the same architecture (other instruction
//! sets lower to other code), then the vector width (it decides the register tiles a model
//! learns to like), then the cores (how parallel loops pay off), then the ISA features that
//! differ, then whether the CPU model differs. Anything else (compiler flags, caches) only
//! breaks ties through the caller's order.

use crate::target::Target;

/// How far a target is from another; smaller is nearer, compared field by field in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct TargetDistance {
    /// 1 when the architectures differ.
    pub arch: u8,
    /// Doublings between the two vector widths (128 -> 512 is 2).
    pub vector_width: u32,
    /// Difference in cores.
    pub cores: usize,
    /// ISA features one has and the other has not.
    pub features: usize,
    /// 1 when the CPU models differ.
    pub cpu_model: u8,
}

/// The distance from `a` to `b` (symmetric).
pub fn target_distance(a: &Target, b: &Target) -> TargetDistance {
    let (va, vb) = (a.vector_bits(), b.vector_bits());
    let features = a
        .features
        .iter()
        .filter(|f| !b.features.contains(f))
        .chain(b.features.iter().filter(|f| !a.features.contains(f)))
        .count();
    TargetDistance {
        arch: u8::from(a.arch != b.arch),
        vector_width: va.max(vb).ilog2() - va.min(vb).ilog2(),
        cores: a.cores.abs_diff(b.cores),
        features,
        cpu_model: u8::from(a.cpu_model != b.cpu_model),
    }
}

/// The index of the candidate nearest to `target`; the first of equals wins (callers order
/// their candidates by what should break ties). `None` when there is no candidate.
pub fn nearest_target(target: &Target, candidates: &[Target]) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .min_by_key(|(i, c)| (target_distance(target, c), *i))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x86(features: &[&str], cores: usize) -> Target {
        Target {
            arch: "x86_64".into(),
            features: features.iter().map(|f| f.to_string()).collect(),
            cores,
            cache_bytes: vec![],
            cpu_model: "cpu".into(),
            os: "linux".into(),
            compiler: "cc".into(),
            compiler_version: String::new(),
            cflags: vec![],
            march: "native".into(),
            run_prefix: vec![],
        }
    }

    fn arm(cores: usize) -> Target {
        Target {
            arch: "aarch64".into(),
            features: vec!["neon".into()],
            ..x86(&[], cores)
        }
    }

    const AVX2: &[&str] = &["avx", "avx2", "fma"];
    const AVX512: &[&str] = &["avx", "avx2", "avx512f", "fma"];

    #[test]
    fn a_target_is_at_distance_zero_from_itself_and_the_distance_is_symmetric() {
        let (a, b) = (x86(AVX2, 4), arm(8));
        assert_eq!(target_distance(&a, &a), TargetDistance::default());
        assert_eq!(target_distance(&a, &b), target_distance(&b, &a));
        let d = target_distance(&x86(&["sse2"], 2), &x86(AVX512, 2));
        assert_eq!(d.vector_width, 2, "128 to 512 bits is two doublings");
    }

    #[test]
    fn the_same_architecture_comes_first_then_the_vector_width_then_the_cores() {
        let me = x86(AVX2, 1);
        // Another architecture loses to any x86 target, however alike in width and cores.
        let candidates = [arm(1), x86(AVX512, 64)];
        assert_eq!(nearest_target(&me, &candidates), Some(1));
        // The same width beats nearer cores.
        let candidates = [x86(AVX512, 1), x86(AVX2, 64)];
        assert_eq!(nearest_target(&me, &candidates), Some(1));
        // At the same width, the nearer core count wins.
        let candidates = [x86(AVX2, 16), x86(AVX2, 2)];
        assert_eq!(nearest_target(&me, &candidates), Some(1));
    }

    #[test]
    fn equals_keep_the_callers_order_and_no_candidate_is_none() {
        let me = x86(AVX2, 2);
        let mut other_flags = x86(AVX2, 2);
        other_flags.cflags = vec!["-O2".into()];
        assert_eq!(
            nearest_target(&me, &[other_flags.clone(), x86(AVX2, 2)]),
            Some(0)
        );
        assert_eq!(nearest_target(&me, &[]), None);
    }
}
