//! How long the f64 reference takes for the benchmark's workloads: it runs once per task
//! before the first check, so it counts in every tuning run's wall time.
//!
//! `cargo run --release -p tunehub-engine --example reference_time [SPEC...]`

use std::time::Instant;
use tunehub_engine::{ops, reference};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let specs: Vec<String> = if args.is_empty() {
        [
            "matmul(512,512,512)",
            "matmul(1024,1024,1024)",
            "dense(m=1,n=1000,k=1024,bias=1,relu=1)",
            "conv2d_nchw(n=1,c=64,h=56,w=56,f=64,kh=3,kw=3,pad=1)",
            "conv2d_nhwc(n=1,h=56,w=56,c=64,f=64,kh=3,kw=3,pad=1)",
            "depthwise_conv2d_nchw(n=1,c=32,h=112,w=112,kh=3,kw=3,pad=1)",
            "batch_matmul(b=12,m=128,n=128,k=64)",
            "softmax(m=128,n=1000)",
        ]
        .map(String::from)
        .to_vec()
    } else {
        args
    };
    for spec in &specs {
        let dag = match ops::OpSpec::parse(spec).and_then(|s| Ok(s.dag()?)) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{spec}: {e}");
                std::process::exit(2);
            }
        };
        let t = Instant::now();
        let out = reference::outputs(&dag);
        let s = t.elapsed().as_secs_f64();
        let n: usize = out.iter().map(Vec::len).sum();
        println!("{spec:<60} {s:>8.3} s  ({n} outputs)");
    }
}
