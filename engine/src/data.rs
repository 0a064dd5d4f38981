//! Deterministic test data. Inputs are a pure function of (tensor, flat index, type), computed
//! the same way in Rust (the reference) and in the generated C harness, so no data files travel
//! between the tuner and a device.

use crate::ir::{DType, InputData};

/// The C twin of [`input_bits`], [`input_value`] and [`input_typed`], emitted into every
/// harness. Keep them in step.
pub const C_INPUT_VALUE: &str = r#"static unsigned int tunehub_input_bits(unsigned int tensor, unsigned int idx) {
  unsigned int h = idx * 0x9E3779B1u + (tensor + 1u) * 0x85EBCA77u;
  h ^= h >> 15; h *= 0x2C1B3C6Du; h ^= h >> 12; h *= 0x297A2D39u; h ^= h >> 15;
  return h;
}
static float tunehub_input_value(unsigned int tensor, unsigned int idx) {
  return (float)(tunehub_input_bits(tensor, idx) >> 8) * (1.0f / 8388608.0f) - 1.0f;
}
static int tunehub_input_u8(unsigned int tensor, unsigned int idx) { return (int)(tunehub_input_bits(tensor, idx) >> 24); }
static int tunehub_input_i8(unsigned int tensor, unsigned int idx) { return (int)(tunehub_input_bits(tensor, idx) >> 24) - 128; }
static int tunehub_input_i32(unsigned int tensor, unsigned int idx) { return (int)(tunehub_input_bits(tensor, idx) >> 16) - 32768; }
static float tunehub_input_multiplier(unsigned int tensor, unsigned int idx) {
  unsigned int h = tunehub_input_bits(tensor, idx);
  return ldexpf(1.0f + (float)((h >> 8) & 255u) / 256.0f, -(int)(5u + (h >> 24) % 12u));
}
"#;

/// The hash both sides draw from.
fn input_bits(tensor: u32, idx: u32) -> u32 {
    let mut h = idx
        .wrapping_mul(0x9E37_79B1)
        .wrapping_add((tensor.wrapping_add(1)).wrapping_mul(0x85EB_CA77));
    h ^= h >> 15;
    h = h.wrapping_mul(0x2C1B_3C6D);
    h ^= h >> 12;
    h = h.wrapping_mul(0x297A_2D39);
    h ^= h >> 15;
    h
}

/// A value in `[-1, 1)`, exactly representable in f32 (24 random bits scaled by 2^-23).
pub fn input_value(tensor: u32, idx: u32) -> f32 {
    (input_bits(tensor, idx) >> 8) as f32 * (1.0 / 8_388_608.0) - 1.0
}

/// A value of an input of type `dtype`: [`input_value`] for f32; every value of an 8-bit
/// type, extremes included (saturation and zero points at the ends are exercised); for i32
/// (biases) values in `[-2^15, 2^15)`, so that a bias added to a sum of 8-bit products stays
/// inside i32 on the test data.
pub fn input_typed(tensor: u32, idx: u32, dtype: DType) -> f64 {
    let h = input_bits(tensor, idx);
    match dtype {
        DType::U8 => f64::from(h >> 24),
        DType::I8 => f64::from(h >> 24) - 128.0,
        DType::I32 => f64::from(h >> 16) - 32768.0,
        DType::F32 | DType::F16 => f64::from(input_value(tensor, idx)),
    }
}

/// A value of an input of type `dtype` drawn from `data`: [`input_typed`] for the usual
/// values; a multiplier is `(1 + m / 256) * 2^-e` with `m` in `0..256` and `e` in `5..=16`,
/// exact in f32 on both sides (the C twin builds it with `ldexpf`).
pub fn input_of(tensor: u32, idx: u32, dtype: DType, data: InputData) -> f64 {
    match data {
        InputData::Usual => input_typed(tensor, idx, dtype),
        InputData::Multiplier => {
            let h = input_bits(tensor, idx);
            let m = f64::from((h >> 8) & 255);
            let e = 5 + (h >> 24) % 12;
            (1.0 + m / 256.0) * 2f64.powi(-(e as i32))
        }
    }
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

    /// Integer inputs cover their type, ends included, and only their type.
    #[test]
    fn integer_values_cover_their_type() {
        for dt in [DType::U8, DType::I8] {
            let (lo, hi) = dt.int_range().unwrap();
            let v: Vec<f64> = (0..20_000).map(|i| input_typed(2, i, dt)).collect();
            let (min, max) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            assert_eq!((min, max), (lo as f64, hi as f64), "{dt:?}");
            assert!(v.iter().all(|x| x.fract() == 0.0));
        }
        let b: Vec<f64> = (0..20_000).map(|i| input_typed(1, i, DType::I32)).collect();
        assert!(
            b.iter()
                .all(|&x| (-32768.0..32768.0).contains(&x) && x.fract() == 0.0)
        );
        assert_eq!(input_typed(4, 9, DType::F32), f64::from(input_value(4, 9)));
    }
}
