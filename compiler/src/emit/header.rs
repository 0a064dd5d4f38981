//! `NAME.h`: the model's C API, usable from C and C++. The inputs' and outputs' names, types
//! and shapes are macros (a `static const` array in a header would be an unused variable in
//! every file that includes it but does not read it).

use std::fmt::Write;

/// One input or output as the header and the manifest describe it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Io {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<i64>,
}

pub fn header(name: &str, model: &str, inputs: &[Io], outputs: &[Io], steps: usize) -> String {
    let up = name.to_ascii_uppercase();
    // The model's name comes from a path or a request: text a comment can hold.
    let model = c_text(model);
    let mut h = format!(
        "/* {name}: the model {model}, compiled by tunehub.\n\
         *\n\
         * {name}_model *m = {name}_create(\"{name}.weights\");   (NULL: {name}_last_error())\n\
         * {name}_run(m, inputs, outputs);   (0 on success; one pointer per input and output, in\n\
         *                                  the order below, dense row-major float32, any alignment)\n\
         * {name}_destroy(m);\n\
         *\n\
         * A model owns its scratch memory: run one model from one thread at a time (create one per\n\
         * thread to run concurrently). {name}_set_num_threads(n) sets the OpenMP threads of every\n\
         * kernel, for later runs of every model of this library.\n\
         */\n"
    );
    let _ = writeln!(h, "#ifndef {up}_H\n#define {up}_H\n\n#include <stddef.h>\n");
    let _ = writeln!(h, "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");
    for (what, list) in [("INPUT", inputs), ("OUTPUT", outputs)] {
        let _ = writeln!(h, "#define {up}_NUM_{what}S {}", list.len());
        for (i, io) in list.iter().enumerate() {
            let dims: Vec<String> = io.shape.iter().map(i64::to_string).collect();
            let p = format!("{up}_{what}_{i}");
            let _ = writeln!(h, "#define {p}_NAME \"{}\"", c_text(&io.name));
            let _ = writeln!(h, "#define {p}_DTYPE \"{}\"", io.dtype);
            let _ = writeln!(h, "#define {p}_RANK {}", io.shape.len());
            let _ = writeln!(h, "#define {p}_SHAPE {{{}}}", dims.join(", "));
            let _ = writeln!(
                h,
                "#define {p}_ELEMENTS {}",
                io.shape.iter().product::<i64>()
            );
        }
        h.push('\n');
    }
    let _ = writeln!(h, "#define {up}_NUM_STEPS {steps}\n");
    let _ = writeln!(
        h,
        "typedef struct {name}_model {name}_model;\n\n\
         /* The model with its weights file (mapped, not copied); NULL on error. */\n\
         {name}_model* {name}_create(const char* weights_path);\n\
         /* The model with its weights in memory (64-byte aligned; kept alive by the caller until\n\
         * {name}_destroy); NULL on error. */\n\
         {name}_model* {name}_create_from_memory(const void* weights, size_t bytes);\n\
         /* Reads `inputs` (64-byte aligned ones where they are, until it returns) and writes\n\
         * `outputs`; one run at a time per model. */\n\
         int {name}_run({name}_model* model, const float* const* inputs, float* const* outputs);\n\
         /* As run, with {up}_NUM_STEPS + 3 timestamps (seconds) in `t`: at the start, after the\n\
         * inputs are copied in (when not read in place), after each step (manifest.json's `steps`), after the outputs are\n\
         * copied out. */\n\
         int {name}_run_profiled({name}_model* model, const float* const* inputs, float* const* outputs, double* t);\n\
         /* As run_profiled, with the `flush_bytes` of `flush` walked on every thread before each\n\
         * step, outside the timestamps: each step timed from a cold cache. */\n\
         int {name}_run_profiled_cold({name}_model* model, const float* const* inputs, float* const* outputs, double* t, unsigned char* flush, size_t flush_bytes);\n\
         void {name}_destroy({name}_model* model);\n\
         void {name}_set_num_threads(int n);\n\
         /* Why the last create or run failed. */\n\
         const char* {name}_last_error(void);\n"
    );
    let _ = writeln!(h, "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {up}_H */");
    h
}

/// `s` inside a C string literal or comment: printable ASCII but `"`, `\` and `*/`; anything
/// else becomes `?`.
pub fn c_text(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect::<String>()
        .replace("*/", "*?")
}
