//! Kernel times for people: in the unit that shows their digits. Kernels run from nanoseconds
//! (a small elementwise operator) to seconds (a large convolution on a board): one fixed unit
//! printed a 29 ns kernel as `0.0000 ms`.

/// The units, smallest first, with their size in seconds.
const UNITS: [(f64, &str); 4] = [(1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s")];

/// `seconds` with four significant digits in the unit that puts it in [1, 1000): `29.00 ns`,
/// `150.0 µs`, `12.35 ms`, `2.500 s` (below a nanosecond, ns; from 1000 s, s). `-` for what is
/// not a time (NaN, infinite, negative).
pub fn time_text(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "-".into();
    }
    for (i, (size, unit)) in UNITS.iter().enumerate() {
        let v = seconds / size;
        // 999.96 would round to `1000.0`: the next unit shows it as `1.000`.
        if v < 999.95 || i + 1 == UNITS.len() {
            let decimals = match v {
                v if v >= 99.995 => 1,
                v if v >= 9.9995 => 2,
                _ => 3,
            };
            return format!("{v:.decimals$} {unit}");
        }
    }
    unreachable!("the last unit takes any time")
}

#[cfg(test)]
mod tests {
    use super::time_text;

    #[test]
    fn each_time_in_the_unit_that_shows_its_digits() {
        for (seconds, text) in [
            (29e-9, "29.00 ns"),
            (0.5e-9, "0.500 ns"),
            (0.0, "0.000 ns"),
            (1.5e-4, "150.0 µs"),
            (1.234e-6, "1.234 µs"),
            (0.012_345_6, "12.35 ms"),
            (2.5, "2.500 s"),
            (4321.0, "4321.0 s"),
        ] {
            assert_eq!(time_text(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn rounding_up_moves_to_the_next_unit() {
        assert_eq!(time_text(999.96e-6), "1.000 ms");
        assert_eq!(time_text(9.9996e-3), "10.00 ms");
        assert_eq!(time_text(99.996e-9), "100.0 ns");
    }

    #[test]
    fn what_is_not_a_time_is_a_dash() {
        for s in [f64::NAN, f64::INFINITY, -1e-3] {
            assert_eq!(time_text(s), "-");
        }
    }

    #[test]
    fn no_kernel_time_prints_as_zero() {
        for s in [29e-9, 1e-9, 3e-8, 7.7e-7, 4e-5] {
            let t = time_text(s);
            assert!(!t.starts_with("0.0"), "{s}: {t}");
        }
    }
}
