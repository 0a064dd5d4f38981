use tunehub_engine::{codegen, ops, sample::RandomSampler, target::Target};
fn main() {
    let t = Target::detect();
    let w = ops::Window {
        kh: 3,
        kw: 3,
        stride: 1,
        pad: 1,
        dilation: 1,
    };
    let mut worst = 0.0f64;
    for seed in 0..300u64 {
        let a = 1 + seed as i64 % 15;
        let b = 1 + (seed as i64 * 7) % 69;
        let dags = [
            ops::softmax(a, b).unwrap(),
            ops::matmul(a * 3, b, 40).unwrap(),
            ops::conv2d_nchw(1, 1 + a % 6, 3 + a % 9, 4 + a % 9, 1 + b % 6, w, true, true).unwrap(),
            ops::elementwise(a, b).unwrap(),
            ops::pool2d(ops::PoolKind::Avg, 1, 3, 3 + a, 3 + a, w).unwrap(),
        ];
        let dag = &dags[seed as usize % dags.len()];
        let mut smp = RandomSampler::new(dag, &t, seed);
        let s = smp.sample();
        let src = codegen::kernel_source(dag, &s, &t).unwrap();
        std::fs::write("/tmp/slow.c", &src).unwrap();
        let t0 = std::time::Instant::now();
        let st = std::process::Command::new("timeout")
            .args([
                "20",
                "gcc",
                "-O3",
                "-march=native",
                "-mprefer-vector-width=512",
                "-fopenmp",
                "-c",
                "/tmp/slow.c",
                "-o",
                "/tmp/slow.o",
            ])
            .status()
            .unwrap();
        let dt = t0.elapsed().as_secs_f64();
        worst = worst.max(dt);
        if dt > 3.0 || !st.success() {
            println!("seed {seed} {dt:.1}s {}", s.to_json());
            std::fs::copy("/tmp/slow.c", format!("/tmp/slow_{seed}.c")).unwrap();
        }
    }
    println!("worst {worst:.2}s");
}
