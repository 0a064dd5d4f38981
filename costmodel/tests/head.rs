//! The head model on the measured dataset (`costmodel/data/records.jsonl`, real kernels of this
//! repository's search): it must raise the recall of the fast region without giving up the
//! body's order of the rest. One split of the protocol of `examples/ranking.rs`.

use std::fs::File;
use std::io::BufReader;
use tunehub_costmodel::XgbParams;
use tunehub_costmodel::dataset::{read_records, to_task_samples};
use tunehub_costmodel::eval::{XgbRanker, seen_workloads};

#[test]
fn the_head_finds_the_fast_region_of_held_out_records() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/records.jsonl");
    let records = read_records(BufReader::new(File::open(path).expect("the dataset"))).unwrap();
    let tasks = to_task_samples(&records).unwrap();
    let with = seen_workloads(&mut XgbRanker(XgbParams::default(), None), &tasks, 3, 42).unwrap();
    let without = seen_workloads(
        &mut XgbRanker(
            XgbParams {
                head: None,
                ..XgbParams::default()
            },
            None,
        ),
        &tasks,
        3,
        42,
    )
    .unwrap();
    eprintln!("with the head {with:?}\nwithout {without:?}");
    assert!(
        with.near5 > without.near5 && with.top5 > without.top5,
        "top-5 {} / near-5 {} with the head, {} / {} without",
        with.top5,
        with.near5,
        without.top5,
        without.near5
    );
    assert!(
        with.pairwise > without.pairwise - 0.01,
        "pairwise {} with the head, {} without",
        with.pairwise,
        without.pairwise
    );
}
