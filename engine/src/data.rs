//! Deterministic test data. Inputs are a pure function of (tensor, flat index), computed the
//! same way in Rust (the reference) and in the generated C harness, so no data files travel
//! between the tuner and a device.

/// The C twin of [`input_value`], emitted into every harness. Keep the two in step.
pub const C_INPUT_VALUE: &str = r#"static float tunehub_input_value(unsigned int tensor, unsigned int idx) {
  unsigned int h = idx * 0x9E3779B1u + (tensor + 1u) * 0x85EBCA77u;
  h ^= h >> 15; h *= 0x2C1B3C6Du; h ^= h >> 12; h *= 0x297A2D39u; h ^= h >> 15;
  return (float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
}
"#;

/// A value in `[-1, 1)`, exactly representable in f32 (24 random bits scaled by 2^-23).
pub fn input_value(tensor: u32, idx: u32) -> f32 {
    let mut h = idx
        .wrapping_mul(0x9E37_79B1)
        .wrapping_add((tensor.wrapping_add(1)).wrapping_mul(0x85EB_CA77));
    h ^= h >> 15;
    h = h.wrapping_mul(0x2C1B_3C6D);
    h ^= h >> 12;
    h = h.wrapping_mul(0x297A_2D39);
    h ^= h >> 15;
    (h >> 8) as f32 * (1.0 / 8_388_608.0) - 1.0
}

/// Fills a whole input tensor.
pub fn input_tensor(tensor: u32, len: usize) -> Vec<f32> {
    (0..len as u32).map(|i| input_value(tensor, i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_in_range_and_vary() {
        let v = input_tensor(3, 10_000);
        assert!(v.iter().all(|&x| (-1.0..1.0).contains(&x)));
        let mean: f32 = v.iter().sum::<f32>() / v.len() as f32;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert_ne!(input_value(0, 5), input_value(1, 5));
    }
}
