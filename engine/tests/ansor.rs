//! Schedules TVM's auto_scheduler wrote (TVM 0.19 tuning `tunehub.conv2d_nchw`, the log in
//! `src/interchange/ansor/testdata`) read as tunehub steps: each builds with the real C
//! compiler, runs, and matches the reference.

use serde_json::Value;
use tunehub_engine::interchange::ansor::{AnsorWorkload, from_ansor};
use tunehub_engine::measure::{ErrorCode, MeasureOptions, Measurer};
use tunehub_engine::schedule::Schedule;
use tunehub_engine::target::Target;

const TVM_LOG: &str = include_str!("../src/interchange/ansor/testdata/tvm_conv2d_nchw.json");

#[test]
fn schedules_tvm_wrote_run_here_and_match_the_reference() {
    let target = Target::detect();
    for line in TVM_LOG.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let task = AnsorWorkload::parse_key(v["i"][0][0].as_str().unwrap())
            .unwrap()
            .task()
            .unwrap();
        let steps = from_ansor(v["i"][1][1].as_array().unwrap(), &task.dag).unwrap();
        let schedule = Schedule::new(steps);
        let r = Measurer::new(&target, MeasureOptions::check_only())
            .measure(&task, std::slice::from_ref(&schedule));
        assert_eq!(
            r[0].error,
            ErrorCode::NoError,
            "{}\nschedule: {}",
            r[0].error_msg,
            schedule.to_json()
        );
    }
}
