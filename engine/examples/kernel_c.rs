//! Prints the generated C of a hand schedule, to read it or its assembly (`gcc -S`).
//!
//! `cargo run -p tunehub-engine --example kernel_c -- [matmul N TI TJ] [layout_free]`
//! (`layout_free`: B packed, as `Task::with_layout_free(&["B"])` does)

use tunehub_engine::codegen::generate_with;
use tunehub_engine::lower::LowerOptions;
use tunehub_engine::ops;
use tunehub_engine::schedule::hand;
use tunehub_engine::target::Target;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: i64| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let target = Target::detect();
    let n = num(1, 512);
    let (dag, sched) = (
        ops::matmul(n, n, n).unwrap(),
        hand::matmul_register_tiled(n, num(2, 8), num(3, 64)),
    );
    let opts = LowerOptions {
        layout_free: if args.iter().any(|a| a == "layout_free") {
            vec![1]
        } else {
            vec![]
        },
    };
    let k = generate_with(&dag, &sched, &target, &opts).expect("lowers");
    print!("{}", k.source);
}
