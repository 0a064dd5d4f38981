//! C headers of linkable kernels: the prototypes, usable from C and C++, under a comment that
//! says where the kernel came from and how to call it.

use super::{Kernel, Role};
use std::fmt::Write;

/// The header of one kernel: its comment, its prototypes, an include guard.
pub(super) fn standalone(k: &Kernel) -> String {
    let body = format!("{}{}", comment(k), prototypes(k));
    wrap(&k.symbol, &body)
}

/// A comment naming the record, its speed, the target, the build and the arguments.
pub(super) fn comment(k: &Kernel) -> String {
    let p = &k.provenance;
    let mut c = format!("/* {}: {}\n", k.symbol, one_line(&p.description));
    let measured = if p.record_id.is_empty() {
        format!(
            "{:.2} GFLOP/s predicted (transferred, not measured)",
            p.gflops
        )
    } else {
        format!("record {}, {:.2} GFLOP/s measured", p.record_id, p.gflops)
    };
    let _ = writeln!(c, " *   workload {}; {measured}", p.workload_key);
    let _ = writeln!(c, " *   on target {}", p.target_key);
    let _ = writeln!(
        c,
        " *   built with {} ({}) {}; linked with {}",
        k.compiler,
        one_line(&k.compiler_version),
        k.cflags.join(" "),
        k.ldflags.join(" ")
    );
    let _ = writeln!(
        c,
        " *   {} OpenMP threads, {}(n) to change; every pointer {}-byte aligned",
        k.threads,
        k.set_num_threads,
        k.args.first().map_or(super::ALIGNMENT, |a| a.alignment)
    );
    for a in &k.args {
        let dims: String = a.shape.iter().map(|d| format!("[{d}]")).collect();
        let _ = write!(
            c,
            " *   {}: {} {dims} {}",
            a.name,
            a.c_type,
            a.role.as_str()
        );
        if let (Some(f), Some(n)) = (&a.pack_function, a.packed_elements) {
            let _ = write!(
                c,
                ", passed packed: {f}(src, dst) writes its {n} elements once"
            );
        }
        c.push('\n');
    }
    c.push_str(" */\n");
    c
}

/// The kernel's prototypes: the kernel, its packing functions, its thread setter. `restrict`
/// is left out (C++ has none); a top-level qualifier does not change a parameter's type, so
/// these match the definitions.
pub(super) fn prototypes(k: &Kernel) -> String {
    let params: Vec<String> = k
        .args
        .iter()
        .map(|a| {
            let q = if a.role == Role::Output { "" } else { "const " };
            format!("{q}{}* {}", a.c_type, a.name)
        })
        .collect();
    let mut s = format!("void {}({});\n", k.symbol, params.join(", "));
    for a in &k.args {
        if let Some(f) = &a.pack_function {
            let t = a.c_type;
            let _ = writeln!(s, "void {f}(const {t}* src, {t}* dst);");
        }
    }
    let _ = writeln!(s, "void {}(int n);", k.set_num_threads);
    s
}

/// `body` under an include guard derived from `name`, in `extern "C"` for C++.
pub(super) fn wrap(name: &str, body: &str) -> String {
    let guard = format!("{}_H", name.to_ascii_uppercase());
    format!(
        "#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n{body}\n#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */\n"
    )
}

/// Text safe inside a one-line C comment.
fn one_line(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("*/", "* /")
}
