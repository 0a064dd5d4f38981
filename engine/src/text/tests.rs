//! The text form against the operator library, and its error messages.

use super::*;
use crate::ir::{Affine, BinaryOp, CmpOp, Cond, DType, Expr, StageKind, UnaryOp};
use crate::ops;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

const MATMUL: &str = "C[i,j] += A[i,k] * B[k,j] where i<512, j<512, k<512";

const CONV: &str = "
# explicit padding stage, then the convolution
P[n,c,h,w] = select(h >= 1 && h < 57 && w >= 1 && w < 57, X[n,c,h-1,w-1], 0.0) where n<1, c<8, h<58, w<58
O[n,f,y,x] += P[n,c,y+ry,x+rx] * W[f,c,ry,rx] where n<1, f<8, y<56, x<56, c<8, ry<3, rx<3
";

const SOFTMAX: &str = "
M[i] max= X[i,k] where i<64, k<128
E[i,j] = exp(X[i,j] - M[i]) where i<64, j<128
S[i] += E[i,k] where i<64, k<128
Y[i,j] = E[i,j] / S[i] where i<64, j<128
";

fn conv_ref() -> ComputeDag {
    let win = ops::Window::square(3, 1, 1);
    ops::conv2d_nchw(1, 8, 56, 56, 8, win, false, false).unwrap()
}

fn shapes(d: &ComputeDag) -> Vec<Vec<i64>> {
    d.stages.iter().map(|s| s.shape.clone()).collect()
}

fn err(src: &str) -> ParseError {
    parse(src).expect_err("should not parse")
}

#[test]
fn matmul_matches_library() {
    let d = parse(MATMUL).unwrap();
    assert_eq!(
        d.workload_key(),
        ops::matmul(512, 512, 512).unwrap().workload_key()
    );
    assert_eq!(
        d.stages.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["A", "B", "C"]
    );
    assert_eq!(d.stages[2].reduce_axes()[0].name, "k");
    // Declaring the inputs changes nothing.
    let declared = format!("input A[512, 512]; input B[512,512]\n{MATMUL}");
    assert_eq!(parse(&declared).unwrap().workload_key(), d.workload_key());
}

#[test]
fn conv_example_parses_and_matches_library() {
    let d = parse(CONV).unwrap();
    let r = conv_ref();
    assert_eq!(
        d.stages[d.stage_by_name("X").unwrap()].shape,
        [1, 8, 56, 56]
    );
    assert_eq!(shapes(&d), shapes(&r));
    assert_eq!(d.flop_count(), r.flop_count());
    // The library's guard is `0 <= h-1 < 56` grouped per dimension; written the same way,
    // the text form gives the very same workload key.
    let same = CONV.replace(
        "h >= 1 && h < 57 && w >= 1 && w < 57",
        "(h-1 >= 0 && h-1 < 56) && (w-1 >= 0 && w-1 < 56)",
    );
    assert_eq!(parse(&same).unwrap().workload_key(), r.workload_key());
}

#[test]
fn padding_guard_fused_into_a_reduction_bounds_the_read() {
    // The guard constrains `y+ry-1` itself, not a single variable.
    let src = "O[n,f,y,x] += select(y+ry >= 1 && y+ry < 57 && x+rx-1 >= 0 && x+rx-1 < 56, \
               X[n,c,y+ry-1,x+rx-1], 0.0) * W[f,c,ry,rx] \
               where n<1, f<8, y<56, x<56, c<8, ry<3, rx<3";
    let d = parse(src).unwrap();
    assert_eq!(d.stages[0].shape, [1, 8, 56, 56]);
    // Without the guard the read goes negative.
    let e = err("O[y] += X[y+ry-1] where y<56, ry<3");
    assert!(e.message.contains("negative index"), "{e}");
    assert_eq!(e.col, 11, "points at the start of the index expression");
}

#[test]
fn softmax_matches_library() {
    let d = parse(SOFTMAX).unwrap();
    let r = ops::softmax(64, 128).unwrap();
    assert_eq!(d.flop_count(), r.flop_count());
    assert_eq!(d.workload_key(), r.workload_key());
}

#[test]
fn expressions_lower_as_documented() {
    let src = "Y[i] = -X[i] * 2 + relu(i - 1) - max(X[i], 1e-3) \
               / select(X[i] > 0.5 || !(i < 2), 1, -0.5) where i<8";
    let d = parse(src).unwrap();
    let StageKind::Compute { body, .. } = &d.stages[1].kind else {
        panic!()
    };
    let x = || Expr::Load(0, vec![Affine::axis(0)]);
    let cond = Cond::Or(
        Box::new(Cond::Value(
            CmpOp::Gt,
            Box::new(x()),
            Box::new(Expr::Const(0.5)),
        )),
        Box::new(Cond::Not(Box::new(Cond::Index(
            CmpOp::Lt,
            Affine::axis(0),
            Affine::constant(2),
        )))),
    );
    let want = Expr::binary(
        BinaryOp::Sub,
        Expr::binary(
            BinaryOp::Add,
            Expr::binary(
                BinaryOp::Mul,
                Expr::unary(UnaryOp::Neg, x()),
                Expr::Const(2.0),
            ),
            Expr::unary(UnaryOp::Relu, Expr::Index(Affine::new(vec![(0, 1)], -1))),
        ),
        Expr::binary(
            BinaryOp::Div,
            Expr::binary(BinaryOp::Max, x(), Expr::Const(1e-3)),
            Expr::select(cond, Expr::Const(1.0), Expr::Const(-0.5)),
        ),
    );
    assert_eq!(body, &want);
}

#[test]
fn statements_separate_on_semicolons_and_newlines_outside_brackets() {
    let src = "T[i] = A[i,\n 0] + 1 ; U[i] = T[i] where i<4 # comment\n\n  ; \r\n";
    let e = err(src);
    // `T` has no where clause, and its `i` has no extent.
    assert_eq!((e.line, e.col), (1, 3));
    let d = parse("T[i] = A[i,\n 0] + 1 where i<4; U[i] = T[i] where 0 <= i < 4 # c\n\n ;\r\n")
        .unwrap();
    assert_eq!(shapes(&d), [vec![4, 1], vec![4], vec![4]]);
}

#[test]
fn missing_bracket_reports_position_and_expectation() {
    let e = err("input A[4, 4]\nC[i, j += A[i, j] where i<4, j<4");
    assert_eq!((e.line, e.col, e.offset), (2, 8, 21));
    assert_eq!(e.expected, "',' or ']'");
    assert_eq!(e.found, "'+='");
    assert_eq!(e.to_string(), "2:8: expected ',' or ']', found '+='");
    let e = err("C[i] = A[i where i<4");
    assert!(e.expected.contains("']'"), "{e}");
    assert_eq!(e.found, "'where'");
}

#[test]
fn missing_extent_names_the_variable() {
    let e = err("C[i,j] += A[i,k] * B[k,j] where i<4, j<4");
    assert_eq!(
        e.message,
        "no extent for variable 'k': add 'k < N' to the where clause"
    );
    assert_eq!((e.line, e.col), (1, 15));
    for src in [
        "input A[4]\nC[i] = A + 1 where i<4",
        "C[i] = A[i] + A where i<4",
    ] {
        let e = err(src);
        assert!(e.message.contains("'A' is a tensor"), "{src}: {e}");
    }
}

#[test]
fn non_affine_indices_are_rejected() {
    for src in [
        "C[i] += A[i*j] where i<4, j<4",
        "C[i] = A[i/2] where i<4",
        "C[i] = A[0.5] where i<4",
    ] {
        let e = err(src);
        assert!(
            e.message.contains("index expressions must be affine"),
            "{src}: {e}"
        );
    }
    assert_eq!(err("C[i] += A[i*j] where i<4, j<4").col, 12);
    // Multiplying by a constant, on either side, is affine.
    let d = parse("C[i] = A[2*i + i*3 - (1 - 2)] where i<4").unwrap();
    assert_eq!(d.stages[0].shape, [17]);
}

#[test]
fn redefinition_is_rejected() {
    let e = err("A[i] = 1.0 where i<4\nA[i] = 2.0 where i<4");
    assert!(e.message.contains("'A' is already defined at 1:1"), "{e}");
    assert_eq!((e.line, e.col), (2, 1));
    assert!(
        err("input A[4]\nA[i] = 2.0 where i<4")
            .message
            .contains("already defined")
    );
}

#[test]
fn reading_a_later_or_own_output_is_rejected() {
    let e = err("B[i] = A[i] + 1 where i<4\nA[i] = X[i] where i<4");
    assert!(
        e.message
            .contains("'A' is defined by a later statement (line 2)"),
        "{e}"
    );
    assert_eq!((e.line, e.col), (1, 8));
    let e = err("C[i] = C[i] + 1 where i<4");
    assert!(e.message.contains("the tensor it defines"), "{e}");
}

#[test]
fn empty_input_is_an_error() {
    for src in ["", "  \n# only a comment\n ; "] {
        let e = err(src);
        assert_eq!(e.found, "end of input", "{src:?}");
        assert!(e.expected.contains("a statement"));
    }
    assert!(err("input A[4]").expected.contains("computes"));
}

#[test]
fn reduction_operator_must_match_the_variables() {
    let e = err("C[i] = A[i,k] where i<4, k<4");
    assert!(
        e.message
            .contains("variable 'k' is not on the left-hand side"),
        "{e}"
    );
    assert_eq!(e.col, 12);
    let e = err("C[i] max= A[i] where i<4");
    assert!(e.message.contains("'max=' reduces over"), "{e}");
    assert_eq!(e.col, 6);
    assert!(parse("C[i] min= A[i,k] where i<4, k<2").unwrap().stages[1].is_reduction());
}

#[test]
fn other_semantic_errors() {
    let cases = [
        ("C[i,i] = 1.0 where i<4", "appears twice"),
        ("C[i] = 1.0 where i<4, i<5", "two extents"),
        ("C[i] = 1.0 where i<4, q<5", "'q' is not used"),
        ("C[i] = A[i-1] where i<4", "negative index"),
        ("input A[3]\nC[i] = A[i] where i<4", "out of bounds"),
        (
            "input A[4]\nC[i] = A[i, i] where i<4",
            "has 1 dimension but is read with 2",
        ),
        ("C[i] = foo(i) where i<4", "unknown function 'foo'"),
        ("C[i] = exp(i, i) where i<4", "takes 1 argument"),
        (
            "C[i] = A[i] < 1 where i<4",
            "expected a value, found a condition",
        ),
        (
            "C[i] = select(A[i], 1, 2) where i<4",
            "expected a condition",
        ),
        ("C[i] = A[i] where i < 4 < 5", "expected ',' or the end"),
        ("C[i] = 1.0 where i<0", "positive integer extent"),
        ("C[i] = A[i] where 1 <= i < 4", "'0 <= v < N'"),
        ("C[i] = select(0 < i < 2, 1, 2) where i<4", "do not chain"),
        ("C[i] = A[i] @ 2", "found '@'"),
        ("C[i] = A[i] & 2", "expected '&&'"),
        ("C[i] = 1e where i<4", "exponent"),
        ("C[i] = 1e999 where i<4", "finite"),
        ("C[i] = A[i * 99999999] where i<4", "within"),
    ];
    for (src, want) in cases {
        let e = err(src);
        assert!(e.to_string().contains(want), "{src}: {e}");
    }
}

#[test]
fn nesting_is_bounded() {
    let deep = format!("C[i] = {}1{} where i<2", "(".repeat(1000), ")".repeat(1000));
    assert!(err(&deep).message.contains("nest too deeply"));
    let long = format!("C[i] = {} where i<2", vec!["1"; 1000].join(" + "));
    assert!(err(&long).message.contains("too deep"));
    let minus = format!("C[i] = {}1 where i<2", "-".repeat(100_000));
    assert!(err(&minus).message.contains("too deep"));
}

/// A random well-formed program, rendered with either of two naming and spacing styles.
fn random_program(seed: u64, style: usize) -> (String, Vec<i64>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let tname = |t: usize| {
        [
            ["A", "B", "Z", "Out", "Post"],
            ["in_0", "in_1", "z9", "res", "after"],
        ][style][t]
    };
    let vname = |v: usize| {
        [
            ["i", "j", "k", "r", "s"],
            ["v0", "v_1", "w2", "red_a", "red_b"],
        ][style][v]
    };
    let sp = [" ", "  "][style];
    let (ns, nr) = (rng.gen_range(1..=3), rng.gen_range(0..=2));
    let vars: Vec<usize> = (0..ns).chain(3..3 + nr).collect();
    let ext: Vec<i64> = vars.iter().map(|_| rng.gen_range(1..=6)).collect();
    let arity = [rng.gen_range(1..=3), rng.gen_range(1..=3)];
    fn expr(
        rng: &mut impl Rng,
        depth: u32,
        vars: &[usize],
        arity: [usize; 2],
        t: &dyn Fn(usize) -> &'static str,
        v: &dyn Fn(usize) -> &'static str,
    ) -> String {
        let leaf = depth == 0 || rng.gen_bool(0.3);
        let sub = |rng: &mut _| expr(rng, depth.saturating_sub(1), vars, arity, t, v);
        if leaf {
            return match rng.gen_range(0..4) {
                0 => ["2", "0.5", "1e-3", "3"][rng.gen_range(0..4)].to_string(),
                1 => v(vars[rng.gen_range(0..vars.len())]).to_string(),
                _ => {
                    let which = rng.gen_range(0..2);
                    let idx: Vec<String> = (0..arity[which])
                        .map(|_| {
                            let x = v(vars[rng.gen_range(0..vars.len())]);
                            match rng.gen_range(0..3) {
                                0 => x.to_string(),
                                1 => {
                                    format!("{}*{x} + {}", rng.gen_range(1..3), rng.gen_range(0..3))
                                }
                                _ => format!("({x} + 1)"),
                            }
                        })
                        .collect();
                    format!("{}[{}]", t(which), idx.join(", "))
                }
            };
        }
        match rng.gen_range(0..5) {
            0 => format!(
                "({} {} {})",
                sub(rng),
                ["+", "-", "*", "/"][rng.gen_range(0..4)],
                sub(rng)
            ),
            1 => format!(
                "{}({})",
                ["exp", "tanh", "relu", "abs", "sigmoid"][rng.gen_range(0..5)],
                sub(rng)
            ),
            2 => format!("max({}, {})", sub(rng), sub(rng)),
            3 => format!("-{}", sub(rng)),
            _ => {
                let x = v(vars[rng.gen_range(0..vars.len())]);
                format!(
                    "select({x} >= 1 && {} > 0.5, {}, {})",
                    sub(rng),
                    sub(rng),
                    sub(rng)
                )
            }
        }
    }
    let body = expr(&mut rng, 3, &vars, arity, &tname, &vname);
    // One read of all the variables, so that every reduction variable is used.
    let all: Vec<&str> = vars.iter().map(|&v| vname(v)).collect();
    let op = if nr == 0 {
        "="
    } else {
        ["+=", "max=", "min="][rng.gen_range(0..3)]
    };
    let bounds: Vec<String> = vars
        .iter()
        .zip(&ext)
        .map(|(&v, e)| format!("{}{sp}<{sp}{e}", vname(v)))
        .collect();
    let lhs: Vec<&str> = all[..ns].to_vec();
    let mut text = format!(
        "# generated\n{}[{}]{sp}{op}{sp}{}[{}] * {body} where {}\n",
        tname(3),
        lhs.join(","),
        tname(2),
        all.join(&format!(",{sp}")),
        bounds.join(", ")
    );
    if rng.gen_bool(0.5) {
        text += &format!(
            "{}[{}] = relu({}[{}]) where {};",
            tname(4),
            lhs.join(", "),
            tname(3),
            lhs.join(", "),
            bounds[..ns].join(", ")
        );
    }
    (text, ext[..ns].to_vec())
}

#[test]
fn random_programs_parse() {
    for seed in 0..200 {
        let (text, shape) = random_program(seed, 0);
        let d = parse(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
        assert_eq!(d.stages.last().unwrap().shape, shape);
    }
}

/// No panic; a refusal says what was wrong; an accepted program is a DAG within the size
/// limit every DAG keeps.
fn check_parse(s: &str) -> Result<(), TestCaseError> {
    match parse(s) {
        Ok(dag) => {
            for st in &dag.stages {
                prop_assert!(crate::ir::dag::points(&st.axis_extents()).is_some(), "{s}");
            }
        }
        Err(e) => prop_assert!(!e.to_string().trim().is_empty(), "{s:?}: empty error"),
    }
    Ok(())
}

// 256 cases each in `cargo test`; `PROPTEST_CASES=100000` for a long fuzz.
proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn never_panics(s in ".*") {
        check_parse(&s)?;
    }

    #[test]
    fn token_soup_never_panics(toks in prop::collection::vec(prop::sample::select(vec![
        "C", "A", "i", "j", "k", "[", "]", "(", ")", ",", ";", "\n", "=", "+=", "max", "min", "*",
        "+", "-", "/", "<", "<=", ">=", "==", "!=", "&&", "||", "!", "where", "input", "select",
        "exp", "0", "1", "4", "0.5", "1e-3", "99999999999", "#c\n",
        "1048576", "C[i, j] += A[i, k] * B[k, j] where i < 1048576, j < 1048576, k < 1048576;",
    ]), 0..40)) {
        check_parse(&toks.join(" "))?;
    }

    /// Names and spacing do not matter: both renderings give one workload key.
    #[test]
    fn names_do_not_change_the_key(seed in any::<u64>()) {
        let (a, shape) = random_program(seed, 0);
        let (b, _) = random_program(seed, 1);
        let (da, db) = (parse(&a).unwrap(), parse(&b).unwrap());
        prop_assert_eq!(da.workload_key(), db.workload_key());
        prop_assert_eq!(da.flop_count(), db.flop_count());
        prop_assert_eq!(&da.stages.last().unwrap().shape, &shape);
    }
}

#[test]
fn erf_parses_and_its_reference_is_the_error_function() {
    let d = parse("Y[i] = 0.5 * X[i] * (1.0 + erf(X[i] * 0.7071067811865476)) where i<4").unwrap();
    let StageKind::Compute { body, .. } = &d.stages[1].kind else {
        panic!("a compute stage")
    };
    assert!(body.any_unary(&|op| op == UnaryOp::Erf));
    assert_eq!(UnaryOp::from_name("erf"), Some(UnaryOp::Erf));
    // erf(0.5) and erf(-2), to 1e-12.
    assert!((UnaryOp::Erf.eval(0.5) - 0.520_499_877_813_046_5).abs() < 1e-12);
    assert!((UnaryOp::Erf.eval(-2.0) + 0.995_322_265_018_952_7).abs() < 1e-12);
}

/// Types said before a name: `input u8 X[...]`, `u8 Y[...] = ...` (a QDQ model's quantized
/// residual add); f32 unless said, and a tensor may still be called by a type's name. The
/// type is the stage's, so it is part of the workload's key, and the typing rules hold.
#[test]
fn types_are_said_before_names() {
    let src = "
input u8 A[1, 4]
input i8 B[1, 4]
u8 Y[i,j] = round(((A[i,j] - 3) * 0.05 + (B[i,j] + 7) * 0.02) / 0.1) + 4 where i<1, j<4
";
    let d = parse(src).unwrap();
    let types: Vec<(&str, DType)> = d
        .stages
        .iter()
        .map(|s| (s.name.as_str(), s.dtype))
        .collect();
    assert_eq!(
        types,
        [("A", DType::U8), ("B", DType::I8), ("Y", DType::U8)]
    );
    let f32_form = src
        .replace("input u8 ", "input ")
        .replace("input i8 ", "input ");
    let f32_form = f32_form.replace("u8 Y", "Y");
    assert_ne!(parse(&f32_form).unwrap().workload_key(), d.workload_key());
    // Named like a type: a tensor, f32.
    let d = parse("input u8[4]\ni32[i] = u8[i] * 2 where i<4").unwrap();
    assert!(d.stages.iter().all(|s| s.dtype == DType::F32));
    let d = parse("input u8 X[4]\ni32 S[i] += X[i] * X[k] where i<4, k<4").unwrap();
    assert_eq!(d.stages[1].dtype, DType::I32);
    // The typing rules: an i32 stage computes in integers; an 8-bit one does not sum.
    assert!(
        err("input u8 X[4]\ni32 Y[i] = X[i] * 0.5 where i<4")
            .to_string()
            .contains("not an i32")
    );
    assert!(
        err("input u8 X[4]\nu8 Y[i] += X[i] * X[k] where i<4, k<4")
            .to_string()
            .contains("cannot sum")
    );
    assert!(
        err("u8 input X[4]")
            .to_string()
            .contains("the type after 'input'")
    );
}
