//! Prints the tasks of the networks built in code (`nets`), or of a model file:
//! `cargo run -p tunehub-onnx --example tasks -- [resnet18|mobilenet|bert|gpt2|tiny|FILE.onnx]`;
//! `... -- NET --write FILE.onnx` writes the network built in code (also `mobilenetv2`, the
//! whole network), with random weights, to a file instead.

use tunehub_onnx::{Extraction, InputShapes, extract, extract_file, nets};

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "tiny".into());
    let shapes = InputShapes::default();
    if std::env::args().nth(2).as_deref() == Some("--write") {
        // Random weights: a written model is one to run and check, not only to tune.
        let b = tunehub_onnx::builder::ModelBuilder::seeded(1);
        let bytes = match arg.as_str() {
            "resnet18" => nets::resnet18_in(b, Some(1), 224),
            "mobilenet" => nets::mobilenet_v2_block(),
            "mobilenetv2" => nets::mobilenet_v2_in(b, 224),
            "bert" => nets::bert_layer_in(b, 128),
            "bert64" => nets::bert_layer_in(b, 64),
            "gpt2" => nets::gpt2_step_in(b, 127),
            _ => nets::tiny_in(b),
        };
        let out = std::env::args().nth(3).expect("--write FILE");
        std::fs::write(&out, bytes).expect("writing the model");
        return;
    }
    let list = match arg.as_str() {
        "resnet18" => extract(
            &nets::resnet18(Some(1), 224),
            &shapes,
            &Extraction::lenient(),
        ),
        "mobilenet" => extract(&nets::mobilenet_v2_block(), &shapes, &Extraction::lenient()),
        "bert" => extract(&nets::bert_layer(128), &shapes, &Extraction::lenient()),
        "gpt2" => extract(&nets::gpt2_step(127), &shapes, &Extraction::lenient()),
        "tiny" => extract(&nets::tiny(), &shapes, &Extraction::lenient()),
        path => extract_file(std::path::Path::new(path), &shapes, &Extraction::lenient()),
    };
    match list {
        Ok(l) => {
            for t in &l.tasks {
                println!(
                    "x{} {} {} flops\n{}\n  nodes {:?}\n",
                    t.weight, t.label, t.flops, t.expr, t.nodes
                );
            }
            println!("skipped {:?}, glue {}", l.skipped, l.glue);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
