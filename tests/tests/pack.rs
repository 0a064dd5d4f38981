//! Kernel packs through the `tunehub` binary: workloads tuned on a real server, packed by
//! `tunehub pack`, compiled with gcc and clang (`-Wall -Werror`) into a static library, and
//! every kernel called from a C program on the harness's inputs and checked against the
//! reference; the header compiles as C++; a pack naming untuned workloads lists every one of
//! them and writes nothing.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use tunehub_engine::data::input_value;
use tunehub_engine::ir::ComputeDag;
use tunehub_engine::measure::check::compare;
use tunehub_engine::{ops, reference, text};
use tunehub_tests::binaries;
use tunehub_tests::server::{Server, TOKEN, sqlite_path};
use tunehub_tests::tools;

const SPECS: &[&str] = &[
    "matmul(16,16,16)",
    "conv2d_nchw(n=1,c=4,h=8,w=8,f=4,kh=3,kw=3,pad=1)",
    "softmax(4,32)",
];
const EXPR: &str = "Y[i,j] = max(X[i,j] * 2.0, 0.0) where i<8, j<16";

fn sh(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn dag_of(description: &str) -> ComputeDag {
    ops::build_op(description)
        .ok()
        .unwrap_or_else(|| text::parse(description).expect("an op spec or the text form"))
}

fn write_f32(path: &Path, v: &[f32]) {
    std::fs::write(
        path,
        v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
}

fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A C program that, for each kernel of the manifest, reads its inputs from `k<i>_<arg>.in`,
/// packs its weights with their pack functions, calls it and writes each output to
/// `k<i>_<arg>.out`.
fn caller(pack: &str, manifest: &Value) -> String {
    let mut c = format!(
        "#include <stdio.h>\n#include <stdlib.h>\n#include \"{pack}.h\"\n\n\
         static float* buffer(long n) {{ float* p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64)); if (!p) exit(3); return p; }}\n\
         static float* load(const char* f, long n) {{ float* p = buffer(n); FILE* h = fopen(f, \"rb\"); if (!h || fread(p, 4, (size_t)n, h) != (size_t)n) exit(4); fclose(h); return p; }}\n\
         static void save(const char* f, const float* p, long n) {{ FILE* h = fopen(f, \"wb\"); if (!h || fwrite(p, 4, (size_t)n, h) != (size_t)n) exit(5); fclose(h); }}\n\n\
         int main(void) {{\n"
    );
    for (i, k) in manifest["kernels"].as_array().unwrap().iter().enumerate() {
        c.push_str("  {\n");
        let mut call = vec![];
        for a in k["args"].as_array().unwrap() {
            let name = a["name"].as_str().unwrap();
            let n: i64 = a["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_i64().unwrap())
                .product();
            let v = format!("a_{name}");
            if a["role"] == "output" {
                c.push_str(&format!("    float* {v} = buffer({n});\n"));
            } else {
                c.push_str(&format!(
                    "    float* {v} = load(\"k{i}_{name}.in\", {n});\n"
                ));
            }
            if let Some(f) = a["pack_function"].as_str() {
                let packed = a["packed_elements"].as_i64().unwrap();
                c.push_str(&format!(
                    "    float* p_{name} = buffer({packed});\n    {f}({v}, p_{name});\n"
                ));
                call.push(format!("p_{name}"));
            } else {
                call.push(v);
            }
        }
        c.push_str(&format!(
            "    {}(1);\n    {}({});\n",
            k["set_num_threads"].as_str().unwrap(),
            k["symbol"].as_str().unwrap(),
            call.join(", ")
        ));
        for a in k["args"].as_array().unwrap() {
            if a["role"] == "output" {
                let name = a["name"].as_str().unwrap();
                let n: i64 = a["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_i64().unwrap())
                    .product();
                c.push_str(&format!("    save(\"k{i}_{name}.out\", a_{name}, {n});\n"));
            }
        }
        c.push_str("  }\n");
    }
    c.push_str("  return 0;\n}\n");
    c
}

#[tokio::test]
async fn a_pack_builds_into_a_library_whose_kernels_match_the_reference() {
    if !tools::require("kernel pack", &["gcc", "clang", "g++", "ar"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&sqlite_path(dir.path(), "pack.db"), "s1", &[]);
    let url = server.url();
    let run = |args: &[&str]| {
        Command::new(binaries::tunehub())
            .args(args)
            .env("TUNEHUB_SERVER", &url)
            .env("TUNEHUB_TOKEN", TOKEN)
            .env_remove("TUNEHUB_CONFIG")
            .output()
            .unwrap()
    };
    let mut submit = vec!["submit"];
    submit.extend_from_slice(SPECS);
    submit.extend_from_slice(&["--expr", EXPR, "--trials", "2", "--batch", "2", "--watch"]);
    submit.extend_from_slice(&tunehub_tests::cli::MEASURE);
    let out = run(&submit);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Untuned workloads: one line naming each, exit 2, no file written.
    let refused = dir.path().join("refused");
    let out = run(&[
        "pack",
        "matmul(16,16,16)",
        "matmul(7,7,7)",
        "matmul(9,9,9)",
        "--out",
        refused.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("matmul(m=7,n=7,k=7,layout_free=B)")
            && err.contains("matmul(m=9,n=9,k=9,layout_free=B)"),
        "{err}"
    );
    assert!(!err.contains("workload 0 "), "{err}");
    assert!(!refused.exists());
    let out = run(&[
        "pack",
        "matmul(16,16,16)",
        "--name",
        "not-c",
        "--out",
        refused.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!refused.exists());

    let packdir = dir.path().join("pack");
    let mut pack = vec!["pack"];
    pack.extend_from_slice(SPECS);
    pack.extend_from_slice(&["--expr", EXPR, "--name", "nets", "--prefix", "my_", "--out"]);
    pack.push(packdir.to_str().unwrap());
    let out = run(&pack);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(packdir.join("manifest.json")).unwrap())
            .unwrap();
    let kernels = manifest["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), SPECS.len() + 1);
    assert!(
        kernels
            .iter()
            .all(|k| k["symbol"].as_str().unwrap().starts_with("my_"))
    );
    // The op specs' constant weights were tuned packed (the CLI's default): the matmul's B
    // and the conv's kernel come with pack functions.
    let packed: Vec<&str> = kernels
        .iter()
        .flat_map(|k| k["args"].as_array().unwrap())
        .filter(|a| a["pack_function"].as_str().is_some_and(|f| !f.is_empty()))
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert!(
        packed.contains(&"B") && packed.contains(&"kernel"),
        "{packed:?}"
    );

    // Inputs as the harness fills them, outputs from the reference interpreter.
    let mut expected = vec![];
    for (i, k) in kernels.iter().enumerate() {
        let dag = dag_of(k["description"].as_str().unwrap());
        let inputs = dag.placeholders();
        for a in k["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["role"] != "output")
        {
            let name = a["name"].as_str().unwrap();
            let ord = inputs
                .iter()
                .position(|&s| dag.stages[s].name == name)
                .unwrap_or_else(|| panic!("{name} is an input of {}", k["description"]));
            let n: i64 = a["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_i64().unwrap())
                .product();
            let v: Vec<f32> = (0..n as u32).map(|j| input_value(ord as u32, j)).collect();
            write_f32(&packdir.join(format!("k{i}_{name}.in")), &v);
        }
        let outs = reference::outputs(&dag);
        let names: Vec<String> = dag
            .outputs()
            .iter()
            .map(|&o| dag.stages[o].name.clone())
            .collect();
        for (name, want) in names.into_iter().zip(outs) {
            let want: Vec<f32> = want.into_iter().map(|v| v as f32).collect();
            expected.push((format!("k{i}_{name}.out"), want));
        }
    }
    std::fs::write(packdir.join("main.c"), caller("nets", &manifest)).unwrap();
    let cflags: Vec<String> = manifest["cflags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let ldflags: Vec<String> = manifest["ldflags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();

    for cc in ["gcc", "clang"] {
        // The flags the record was measured with, as the manifest gives them (clang takes
        // GCC's).
        sh(Command::new(cc)
            .args(&cflags)
            .args(["-Wall", "-Werror", "-c", "nets.c", "-o", "nets.o"])
            .current_dir(&packdir));
        let _ = std::fs::remove_file(packdir.join("libnets.a"));
        sh(Command::new("ar")
            .args(["rcs", "libnets.a", "nets.o"])
            .current_dir(&packdir));
        sh(Command::new(cc)
            .args([
                "-Wall", "-Werror", "-std=c11", "main.c", "-o", "main", "-L.", "-lnets",
            ])
            .args(&ldflags)
            .current_dir(&packdir));
        sh(Command::new(packdir.join("main")).current_dir(&packdir));
        for (file, want) in &expected {
            let got = read_f32(&packdir.join(file));
            compare(&got, want).unwrap_or_else(|e| panic!("{cc}: {file}: {e}"));
            std::fs::remove_file(packdir.join(file)).unwrap();
        }
    }

    // The header from C++: every prototype declared, in extern "C".
    let mut cpp = "#include \"nets.h\"\nint main() {\n".to_string();
    for k in kernels {
        cpp.push_str(&format!("  (void)&{};\n", k["symbol"].as_str().unwrap()));
    }
    cpp.push_str("  return 0;\n}\n");
    std::fs::write(packdir.join("use.cpp"), cpp).unwrap();
    sh(Command::new("g++")
        .args(["-Wall", "-Werror", "-c", "use.cpp", "-o", "use.o"])
        .current_dir(&packdir));
}
