//! Winograd's minimal filtering F(m x m, 3 x 3) for 3x3 stride-1 convolutions (Lavin and
//! Gray, 2016), as three tasks in NHWC (`Layout::Winograd`): the input transform of each
//! (m+2)x(m+2) tile, `V = B^T d B`, a batched matrix product over the alpha x alpha points,
//! `M[p] = V[p] U[p]` (the library's `batch_matmul`, the weight's transform
//! `U = G g G^T` packed once at build time), and the output transform `Y = A^T M A` with the
//! convolution's epilogue. The product does (m+2)^2 / (9 m^2) of the direct form's multiplies:
//! 0.44 for m = 2, 0.25 for m = 4. Each transform is written in the text form as a chain of
//! `select`s on its point axes, which the search unrolls so that the C compiler folds them
//! (`engine::search::annotate::selectors`).

/// The tile sizes written: F(4x4, 3x3) where the map splits into 4x4 tiles, else F(2x2, 3x3).
pub fn tile(oh: i64, ow: i64) -> Option<i64> {
    if oh % 4 == 0 && ow % 4 == 0 {
        Some(4)
    } else if oh % 2 == 0 && ow % 2 == 0 {
        Some(2)
    } else {
        None
    }
}

/// The transform matrices of F(m, 3): `B^T` (alpha x alpha), `G` (alpha x 3), `A^T`
/// (m x alpha), alpha = m + 2; m = 4 with the points 0, 1, -1, 2, -2, infinity.
pub struct Matrices {
    pub bt: Vec<Vec<f64>>,
    pub g: Vec<Vec<f64>>,
    pub at: Vec<Vec<f64>>,
}

pub fn matrices(m: i64) -> Matrices {
    let rows = |r: &[&[f64]]| r.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
    if m == 2 {
        Matrices {
            bt: rows(&[
                &[1.0, 0.0, -1.0, 0.0],
                &[0.0, 1.0, 1.0, 0.0],
                &[0.0, -1.0, 1.0, 0.0],
                &[0.0, 1.0, 0.0, -1.0],
            ]),
            g: rows(&[
                &[1.0, 0.0, 0.0],
                &[0.5, 0.5, 0.5],
                &[0.5, -0.5, 0.5],
                &[0.0, 0.0, 1.0],
            ]),
            at: rows(&[&[1.0, 1.0, 1.0, 0.0], &[0.0, 1.0, -1.0, -1.0]]),
        }
    } else {
        assert_eq!(m, 4, "F(2, 3) and F(4, 3) only");
        Matrices {
            bt: rows(&[
                &[4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
                &[0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
                &[0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
                &[0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
                &[0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
                &[0.0, 4.0, 0.0, -5.0, 0.0, 1.0],
            ]),
            g: rows(&[
                &[1.0 / 4.0, 0.0, 0.0],
                &[-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
                &[-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
                &[1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
                &[1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
                &[0.0, 0.0, 1.0],
            ]),
            at: rows(&[
                &[1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
                &[0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
                &[0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
                &[0.0, 1.0, -1.0, 8.0, -8.0, 1.0],
            ]),
        }
    }
}

/// The transformed weight `U[e*alpha + u, c, f] = sum_ij G[e][i] w[f, c, i, j] G[u][j]` of an
/// `[f, c, 3, 3]` weight: the product's `B` operand, `[alpha^2, c, f]`.
pub fn weight(w: &[f32], f: usize, c: usize, m: i64) -> Vec<f32> {
    let Matrices { g, .. } = matrices(m);
    let alpha = g.len();
    let mut u = vec![0f32; alpha * alpha * c * f];
    for fi in 0..f {
        for ci in 0..c {
            let k = &w[(fi * c + ci) * 9..][..9];
            // G k: alpha x 3, then (G k) G^T: alpha x alpha, in f64.
            let mut gk = vec![[0f64; 3]; alpha];
            for (e, row) in gk.iter_mut().enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = (0..3).map(|i| g[e][i] * f64::from(k[i * 3 + j])).sum();
                }
            }
            for e in 0..alpha {
                for uu in 0..alpha {
                    let v: f64 = (0..3).map(|j| gk[e][j] * g[uu][j]).sum();
                    u[((e * alpha + uu) * c + ci) * f + fi] = v as f32;
                }
            }
        }
    }
    u
}

/// `sum_k coef[k] * terms[k]` in the text form, zero terms left out and units written plainly.
pub fn combination(coef: &[f64], terms: &[String]) -> String {
    let mut s = String::new();
    for (&c, t) in coef.iter().zip(terms) {
        if c == 0.0 {
            continue;
        }
        let a = c.abs();
        let term = if a == 1.0 {
            t.clone()
        } else {
            format!("{a:?}*{t}")
        };
        if s.is_empty() {
            s = if c < 0.0 { format!("(-{term})") } else { term };
        } else {
            s.push_str(if c < 0.0 { " - " } else { " + " });
            s.push_str(&term);
        }
    }
    format!("({s})")
}

/// `select(v == 0, leaves[0], select(v == 1, leaves[1], ... leaves[last]))`.
pub fn chain(v: &str, leaves: &[String]) -> String {
    let mut s = leaves.last().expect("leaves").clone();
    for (i, l) in leaves.iter().enumerate().rev().skip(1) {
        s = format!("select({v} == {i}, {l}, {s})");
    }
    s
}

/// `M^T X M` at point (`row`, `col`) of the transform by `mt` (rows of `M^T`) of the tile
/// whose element (i, j) is `at(i, j)`: one leaf per output point, selected by `rv` and `cv`.
pub fn transform(
    mt: &[Vec<f64>],
    rv: &str,
    cv: &str,
    at: impl Fn(usize, usize) -> String,
) -> String {
    let n = mt[0].len();
    let rows: Vec<String> = mt
        .iter()
        .map(|r| {
            // Row transform first: t(r, j) = sum_i r[i] x(i, j), then the column one.
            let t: Vec<String> = (0..n)
                .map(|j| combination(r, &(0..n).map(|i| at(i, j)).collect::<Vec<_>>()))
                .collect();
            chain(
                cv,
                &mt.iter().map(|c| combination(c, &t)).collect::<Vec<_>>(),
            )
        })
        .collect();
    chain(rv, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A^T [(G g) . (B^T d)] is the correlation of d with g, for both tile sizes.
    #[test]
    fn one_dimension_is_the_correlation() {
        for m in [2, 4] {
            let Matrices { bt, g, at } = matrices(m);
            let alpha = (m + 2) as usize;
            let d: Vec<f64> = (0..alpha).map(|i| ((i * 7 + 3) % 5) as f64 - 1.7).collect();
            let k = [0.3, -1.1, 0.8];
            let gg: Vec<f64> = (0..alpha)
                .map(|e| (0..3).map(|i| g[e][i] * k[i]).sum())
                .collect();
            let bd: Vec<f64> = (0..alpha)
                .map(|e| (0..alpha).map(|i| bt[e][i] * d[i]).sum())
                .collect();
            for (y, row) in at.iter().enumerate() {
                let got: f64 = (0..alpha).map(|e| row[e] * gg[e] * bd[e]).sum();
                let want: f64 = (0..3).map(|i| d[y + i] * k[i]).sum();
                assert!(
                    (got - want).abs() < 1e-9,
                    "F({m},3) point {y}: {got} against {want}"
                );
            }
        }
    }

    #[test]
    fn tiles_split_the_map() {
        assert_eq!(tile(56, 56), Some(4));
        assert_eq!(tile(14, 14), Some(2));
        assert_eq!(tile(14, 28), Some(2));
        assert_eq!(tile(7, 7), None);
    }

    #[test]
    fn combinations_leave_zeros_out() {
        let t: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(combination(&[0.0, -1.0, 4.0], &t), "((-b) + 4.0*c)");
        assert_eq!(chain("e", &t), "select(e == 0, a, select(e == 1, b, c))");
    }
}
