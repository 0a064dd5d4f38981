//! Prints the generated C of one measured record (a line of the `records.jsonl` that
//! `tunehub-bench search --out` writes), to read two kernels of one workload side by side.
//!
//! `cargo run --release -p tunehub-engine --example record_c -- RECORDS.jsonl LINE`
//! (LINE counts from 1)

use tunehub_engine::codegen::generate_with;
use tunehub_engine::ops::OpSpec;
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(line)) = (
        args.first(),
        args.get(1).and_then(|l| l.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: record_c RECORDS.jsonl LINE");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).expect("readable records");
    let rec: serde_json::Value = serde_json::from_str(
        text.lines()
            .nth(line.saturating_sub(1))
            .expect("line exists"),
    )
    .expect("a JSON record");
    let desc = rec["workload"].as_str().expect("a workload");
    // As the bench wrote it: no `layout_free=` means none.
    let task = OpSpec::parse(desc)
        .expect("a library operator")
        .unpacked_by_default()
        .task()
        .expect("its options fit");
    let sched = Schedule::from_json_value(&rec["steps"]).expect("steps");
    let k =
        generate_with(&task.dag, &sched, &Target::detect(), &task.lower_options()).expect("lowers");
    print!("{}", k.source);
}
