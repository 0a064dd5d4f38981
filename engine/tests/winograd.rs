//! Winograd transforms as the search writes them: stages that choose their expression by
//! `select` on short point axes (`search::annotate::selectors`). In every sketch the point
//! loops are unrolled (next to the vector loop, where the C compiler folds the choice), and
//! every kernel matches the reference. The programs are F(2x2, 3x3) on a 6x6 map of 5
//! channels (no whole vector), as `tunehub-onnx`'s `winograd` writes them.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::schedule::{Annotation, Schedule, Step};
use tunehub_engine::search::annotate::{AnnotateContext, Decider, annotate};
use tunehub_engine::search::sketch;
use tunehub_engine::target::Target;
use tunehub_engine::task::Task;

/// The input transform: the tiles of the padded map, `V = B^T d B` per point `(e, u)`.
const INPUT: &str = "\
P[h,w,c] = select(h-1>=0 && h-1<6 && w-1>=0 && w-1<6, X[h-1,w-1,c], 0.0) where h<8, w<8, c<5
V[e,u,ty,tx,c] = select(e==0, select(u==0,
    ((P[ty*2+0,tx*2+0,c] - P[ty*2+2,tx*2+0,c]) - (P[ty*2+0,tx*2+2,c] - P[ty*2+2,tx*2+2,c])),
    select(u==1,
    ((P[ty*2+0,tx*2+1,c] - P[ty*2+2,tx*2+1,c]) + (P[ty*2+0,tx*2+2,c] - P[ty*2+2,tx*2+2,c])),
    select(u==2,
    (-(P[ty*2+0,tx*2+1,c] - P[ty*2+2,tx*2+1,c]) + (P[ty*2+0,tx*2+2,c] - P[ty*2+2,tx*2+2,c])),
    ((P[ty*2+0,tx*2+1,c] - P[ty*2+2,tx*2+1,c]) - (P[ty*2+0,tx*2+3,c] - P[ty*2+2,tx*2+3,c]))))),
    select(e==1, select(u==0,
    ((P[ty*2+1,tx*2+0,c] + P[ty*2+2,tx*2+0,c]) - (P[ty*2+1,tx*2+2,c] + P[ty*2+2,tx*2+2,c])),
    select(u==1,
    ((P[ty*2+1,tx*2+1,c] + P[ty*2+2,tx*2+1,c]) + (P[ty*2+1,tx*2+2,c] + P[ty*2+2,tx*2+2,c])),
    select(u==2,
    (-(P[ty*2+1,tx*2+1,c] + P[ty*2+2,tx*2+1,c]) + (P[ty*2+1,tx*2+2,c] + P[ty*2+2,tx*2+2,c])),
    ((P[ty*2+1,tx*2+1,c] + P[ty*2+2,tx*2+1,c]) - (P[ty*2+1,tx*2+3,c] + P[ty*2+2,tx*2+3,c]))))),
    select(e==2, select(u==0,
    ((-P[ty*2+1,tx*2+0,c] + P[ty*2+2,tx*2+0,c]) - (-P[ty*2+1,tx*2+2,c] + P[ty*2+2,tx*2+2,c])),
    select(u==1,
    ((-P[ty*2+1,tx*2+1,c] + P[ty*2+2,tx*2+1,c]) + (-P[ty*2+1,tx*2+2,c] + P[ty*2+2,tx*2+2,c])),
    select(u==2,
    (-(-P[ty*2+1,tx*2+1,c] + P[ty*2+2,tx*2+1,c]) + (-P[ty*2+1,tx*2+2,c] + P[ty*2+2,tx*2+2,c])),
    ((-P[ty*2+1,tx*2+1,c] + P[ty*2+2,tx*2+1,c]) - (-P[ty*2+1,tx*2+3,c] + P[ty*2+2,tx*2+3,c]))))),
    select(u==0,
    ((P[ty*2+1,tx*2+0,c] - P[ty*2+3,tx*2+0,c]) - (P[ty*2+1,tx*2+2,c] - P[ty*2+3,tx*2+2,c])),
    select(u==1,
    ((P[ty*2+1,tx*2+1,c] - P[ty*2+3,tx*2+1,c]) + (P[ty*2+1,tx*2+2,c] - P[ty*2+3,tx*2+2,c])),
    select(u==2,
    (-(P[ty*2+1,tx*2+1,c] - P[ty*2+3,tx*2+1,c]) + (P[ty*2+1,tx*2+2,c] - P[ty*2+3,tx*2+2,c])),
    ((P[ty*2+1,tx*2+1,c] - P[ty*2+3,tx*2+1,c]) - (P[ty*2+1,tx*2+3,c] - P[ty*2+3,tx*2+3,c])))))))) where e<4, u<4, ty<3, tx<3, c<5
";

/// The output transform `A^T M A` per point `(a, b)`, then the epilogue (bias, relu).
const OUTPUT: &str = "\
input M[16,9,5]
O[ty,a,tx,b,f] = select(a==0, select(b==0,
    ((M[0,ty*3+tx,f] + M[4,ty*3+tx,f] + M[8,ty*3+tx,f]) + (M[1,ty*3+tx,f] + M[5,ty*3+tx,f] + M[9,ty*3+tx,f]) + (M[2,ty*3+tx,f] + M[6,ty*3+tx,f] + M[10,ty*3+tx,f])),
    ((M[1,ty*3+tx,f] + M[5,ty*3+tx,f] + M[9,ty*3+tx,f]) - (M[2,ty*3+tx,f] + M[6,ty*3+tx,f] + M[10,ty*3+tx,f]) - (M[3,ty*3+tx,f] + M[7,ty*3+tx,f] + M[11,ty*3+tx,f]))),
    select(b==0,
    ((M[4,ty*3+tx,f] - M[8,ty*3+tx,f] - M[12,ty*3+tx,f]) + (M[5,ty*3+tx,f] - M[9,ty*3+tx,f] - M[13,ty*3+tx,f]) + (M[6,ty*3+tx,f] - M[10,ty*3+tx,f] - M[14,ty*3+tx,f])),
    ((M[5,ty*3+tx,f] - M[9,ty*3+tx,f] - M[13,ty*3+tx,f]) - (M[6,ty*3+tx,f] - M[10,ty*3+tx,f] - M[14,ty*3+tx,f]) - (M[7,ty*3+tx,f] - M[11,ty*3+tx,f] - M[15,ty*3+tx,f])))) where ty<3, a<2, tx<3, b<2, f<5
Y[ty,a,tx,b,f] = relu(O[ty,a,tx,b,f] + Bias[f]) where ty<3, a<2, tx<3, b<2, f<5
";

fn check(src: &str) {
    let target = Target::detect();
    let dag = tunehub_engine::text::parse(src).expect("the program parses");
    let task = Task::new(dag.clone(), "winograd transform");
    let ctx = AnnotateContext::for_target(&target);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut schedules: Vec<Schedule> = vec![];
    for sk in sketch::generate(&dag, &sketch::cpu_rules()) {
        for _ in 0..3 {
            let mut d = Decider::sample(&mut rng);
            let (s, _) = annotate(&dag, &sk, &ctx, &mut d).expect("annotates");
            let unrolled = s
                .steps
                .iter()
                .filter(|st| {
                    matches!(
                        st,
                        Step::Annotate {
                            ann: Annotation::Unroll,
                            ..
                        }
                    )
                })
                .count();
            assert_eq!(unrolled, 2, "the two point loops unrolled: {}", s.to_json());
            schedules.push(s);
        }
    }
    let mut measurer = Measurer::new(&target, MeasureOptions::check_only());
    for (s, r) in schedules.iter().zip(measurer.measure(&task, &schedules)) {
        assert_eq!(
            r.error,
            ErrorCode::NoError,
            "{}: {}",
            r.error_msg,
            s.to_json()
        );
    }
}

#[test]
fn input_transforms_unroll_their_points_and_match_the_reference() {
    check(INPUT);
}

#[test]
fn output_transforms_unroll_their_points_in_any_sketch_and_match_the_reference() {
    check(OUTPUT);
}
