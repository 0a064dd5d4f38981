//! A built model loaded in this process: its manifest read, `libNAME.so` opened, the model
//! created on its weights file; `run` takes and returns dense float32 arrays.

use crate::emit::manifest::Manifest;
use crate::error::CompileError;
use std::ffi::{CString, c_char, c_int, c_void};
use std::path::Path;
use tunehub_onnx::reference::Array;

type Create = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type Run = unsafe extern "C" fn(*mut c_void, *const *const f32, *const *mut f32) -> c_int;
type RunProfiled =
    unsafe extern "C" fn(*mut c_void, *const *const f32, *const *mut f32, *mut f64) -> c_int;
type RunProfiledCold = unsafe extern "C" fn(
    *mut c_void,
    *const *const f32,
    *const *mut f32,
    *mut f64,
    *mut u8,
    usize,
) -> c_int;
type Destroy = unsafe extern "C" fn(*mut c_void);
type SetThreads = unsafe extern "C" fn(c_int);
type LastError = unsafe extern "C" fn() -> *const c_char;

pub struct Library {
    pub manifest: Manifest,
    model: *mut c_void,
    run: Run,
    run_profiled: RunProfiled,
    /// `None` in a library built before it existed.
    run_profiled_cold: Option<RunProfiledCold>,
    destroy: Destroy,
    set_threads: SetThreads,
    // Last: dropped after the model is destroyed.
    _lib: libloading::Library,
}

fn fail(msg: impl Into<String>) -> CompileError {
    CompileError::Library(msg.into())
}

impl Library {
    /// Opens the model built in `dir`.
    pub fn open(dir: &Path) -> Result<Library, CompileError> {
        let manifest = Manifest::read(dir)?;
        let lib_name = manifest.library.clone().ok_or_else(|| {
            fail(format!(
                "{} was built with --no-compile: no library to run",
                dir.display()
            ))
        })?;
        let lib_path = dir.join(&lib_name);
        // SAFETY: the library is tunehub's own output for this manifest; loading runs no code
        // of ours but the C runtime's initialisers.
        let lib = unsafe { libloading::Library::new(&lib_path) }
            .map_err(|e| fail(format!("cannot load {}: {e}", lib_path.display())))?;
        let name = &manifest.name;
        let bad = |e: libloading::Error| fail(format!("{}: {e}", lib_path.display()));
        // SAFETY: the symbols' types are the ones `emit::header` declares, and the library
        // outlives the copies (it is dropped last).
        let (create, run, run_profiled, destroy, set_threads, last_error) = unsafe {
            let sym = |s: &str| format!("{name}_{s}").into_bytes();
            let c: libloading::Symbol<Create> = lib.get(&sym("create")).map_err(bad)?;
            let r: libloading::Symbol<Run> = lib.get(&sym("run")).map_err(bad)?;
            let p: libloading::Symbol<RunProfiled> = lib.get(&sym("run_profiled")).map_err(bad)?;
            let d: libloading::Symbol<Destroy> = lib.get(&sym("destroy")).map_err(bad)?;
            let t: libloading::Symbol<SetThreads> =
                lib.get(&sym("set_num_threads")).map_err(bad)?;
            let l: libloading::Symbol<LastError> = lib.get(&sym("last_error")).map_err(bad)?;
            (*c, *r, *p, *d, *t, *l)
        };
        // SAFETY: as above.
        let run_profiled_cold = unsafe {
            lib.get::<RunProfiledCold>(format!("{name}_run_profiled_cold").as_bytes())
                .ok()
                .map(|s| *s)
        };
        let weights = dir.join(&manifest.weights);
        let c_path = CString::new(weights.to_string_lossy().into_owned())
            .map_err(|_| fail("the weights path has a NUL byte"))?;
        // An embedded library is created from its own copy: the file is not read.
        let path_arg = if manifest.embedded_weights {
            std::ptr::null()
        } else {
            c_path.as_ptr()
        };
        // SAFETY: a valid C string or NULL; the function returns NULL or a model we own.
        let model = unsafe { create(path_arg) };
        if model.is_null() {
            // SAFETY: the library's static error text, NUL-terminated.
            let why = unsafe { std::ffi::CStr::from_ptr(last_error()) }
                .to_string_lossy()
                .into_owned();
            return Err(fail(format!("{}: {why}", weights.display())));
        }
        Ok(Library {
            manifest,
            model,
            run,
            run_profiled,
            run_profiled_cold,
            destroy,
            set_threads,
            _lib: lib,
        })
    }

    /// OpenMP threads of every kernel of the library.
    pub fn set_num_threads(&self, n: u32) {
        // SAFETY: plain setter.
        unsafe { (self.set_threads)(c_int::try_from(n.max(1)).unwrap_or(c_int::MAX)) }
    }

    /// Runs the model on `inputs` (the manifest's, in its order, each with its shape).
    pub fn run(&mut self, inputs: &[Array]) -> Result<Vec<Array>, CompileError> {
        self.exec(inputs, None)
    }

    /// Runs the model on copies of `inputs` placed 64-byte aligned (`aligned`: the library
    /// reads them where they are) or 4 bytes past it (it copies them first): the check runs
    /// both.
    pub fn run_placed(
        &mut self,
        inputs: &[Array],
        aligned: bool,
    ) -> Result<Vec<Array>, CompileError> {
        self.check(inputs)?;
        let mut b = Prepared::new(inputs, self.new_outputs(), usize::from(!aligned));
        let ins = b.ins();
        self.call(&ins, &mut b.outputs, None)?;
        Ok(b.outputs)
    }

    /// Runs the model once and times its phases: the inputs copied in, each step (the
    /// manifest's `steps`), the outputs copied out; in seconds.
    pub fn run_profiled(
        &mut self,
        inputs: &[Array],
    ) -> Result<(Vec<Array>, Vec<f64>), CompileError> {
        self.check(inputs)?;
        let ins: Vec<*const f32> = inputs.iter().map(|a| a.data.as_ptr()).collect();
        let mut outputs = self.new_outputs();
        let t = self.profiled(&ins, &mut outputs, None)?;
        Ok((outputs, t))
    }

    /// One run timed phase by phase, each step after `flush` is walked (when given and the
    /// library has `run_profiled_cold`; the walks are not in the times).
    fn profiled(
        &mut self,
        ins: &[*const f32],
        outputs: &mut [Array],
        flush: Option<&mut [u8]>,
    ) -> Result<Vec<f64>, CompileError> {
        let n = self.manifest.steps.len();
        let mut t = vec![0f64; n + 3];
        self.call(ins, outputs, Some((&mut t, flush)))?;
        Ok(t.windows(2).map(|w| w[1] - w[0]).collect())
    }

    fn exec(
        &mut self,
        inputs: &[Array],
        times: Option<(&mut Vec<f64>, Option<&mut [u8]>)>,
    ) -> Result<Vec<Array>, CompileError> {
        self.check(inputs)?;
        let ins: Vec<*const f32> = inputs.iter().map(|a| a.data.as_ptr()).collect();
        let mut outputs = self.new_outputs();
        self.call(&ins, &mut outputs, times)?;
        Ok(outputs)
    }

    /// `inputs` are the manifest's, in number and shape.
    fn check(&self, inputs: &[Array]) -> Result<(), CompileError> {
        let m = &self.manifest;
        if inputs.len() != m.inputs.len() {
            return Err(fail(format!(
                "{} inputs given, the model takes {}",
                inputs.len(),
                m.inputs.len()
            )));
        }
        for (a, io) in inputs.iter().zip(&m.inputs) {
            let want: Vec<usize> = io.shape.iter().map(|&d| d as usize).collect();
            if a.shape != want || a.data.len() != want.iter().product::<usize>() {
                return Err(fail(format!(
                    "input '{}' is {:?}, the model takes {:?}",
                    io.name, a.shape, want
                )));
            }
        }
        Ok(())
    }

    /// Zeroed outputs of the manifest's shapes.
    fn new_outputs(&self) -> Vec<Array> {
        self.manifest
            .outputs
            .iter()
            .map(|io| {
                let shape: Vec<usize> = io.shape.iter().map(|&d| d as usize).collect();
                Array {
                    data: vec![0.0; shape.iter().product()],
                    shape,
                }
            })
            .collect()
    }

    /// One run on `ins` (checked by `check`, or copies of checked inputs) into `outputs` (from
    /// `new_outputs`).
    fn call(
        &mut self,
        ins: &[*const f32],
        outputs: &mut [Array],
        times: Option<(&mut Vec<f64>, Option<&mut [u8]>)>,
    ) -> Result<(), CompileError> {
        let m = &self.manifest;
        let outs: Vec<*mut f32> = outputs.iter_mut().map(|a| a.data.as_mut_ptr()).collect();
        // SAFETY: every pointer has the manifest's element count (checked above), `times` the
        // header's NUM_STEPS + 3 entries, the flush buffer its length; the model is ours and
        // used from one thread at a time (`&mut self`).
        let rc = unsafe {
            match (times, self.run_profiled_cold) {
                (None, _) => (self.run)(self.model, ins.as_ptr(), outs.as_ptr()),
                (Some((t, Some(f))), Some(cold)) => cold(
                    self.model,
                    ins.as_ptr(),
                    outs.as_ptr(),
                    t.as_mut_ptr(),
                    f.as_mut_ptr(),
                    f.len(),
                ),
                (Some((t, _)), _) => {
                    (self.run_profiled)(self.model, ins.as_ptr(), outs.as_ptr(), t.as_mut_ptr())
                }
            }
        };
        if rc != 0 {
            return Err(fail(format!("{}_run failed ({rc})", m.name)));
        }
        Ok(())
    }
}

/// A model's latency: the median and 90th percentile of timed runs, in ms.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    pub median_ms: f64,
    pub p90_ms: f64,
}

impl Library {
    /// Runs `warmup` times, then times `runs` runs one by one.
    pub fn time(
        &mut self,
        inputs: &[Array],
        warmup: u32,
        runs: u32,
    ) -> Result<Latency, CompileError> {
        self.check(inputs)?;
        let mut b = Prepared::new(inputs, self.new_outputs(), 0);
        let ins = b.ins();
        for _ in 0..warmup {
            self.call(&ins, &mut b.outputs, None)?;
        }
        let mut times: Vec<f64> = (0..runs.max(1))
            .map(|_| {
                let t = std::time::Instant::now();
                self.call(&ins, &mut b.outputs, None)
                    .map(|()| t.elapsed().as_secs_f64() * 1e3)
            })
            .collect::<Result<_, _>>()?;
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        Ok(Latency {
            median_ms: at(0.5),
            p90_ms: at(0.9),
        })
    }

    /// Where a run's time goes, the median of each phase over `runs` profiled runs; and, when
    /// the library can, each step again from a cold cache in `COLD_RUNS` runs interleaved with
    /// them (`Profile::kernels_cold_ms`).
    pub fn profile(&mut self, inputs: &[Array], runs: u32) -> Result<Profile, CompileError> {
        let runs = runs.max(1) as usize;
        self.check(inputs)?;
        let mut b = Prepared::new(inputs, self.new_outputs(), 0);
        let ins = b.ins();
        let mut flush = self.run_profiled_cold.map(|_| vec![0u8; flush_bytes()]);
        if let Some(f) = flush.as_deref_mut() {
            // Its pages faulted in before anything is timed.
            self.profiled(&ins, &mut b.outputs, Some(f))?;
        }
        let (mut warm, mut cold) = (vec![], vec![]);
        for i in 0..runs {
            warm.push(self.profiled(&ins, &mut b.outputs, None)?);
            // Spread over the warm runs, so that both see the machine in the same state.
            if let Some(f) = flush.as_deref_mut()
                && i * COLD_RUNS / runs != (i + 1) * COLD_RUNS / runs
            {
                cold.push(self.profiled(&ins, &mut b.outputs, Some(f))?);
            }
        }
        let median = medians(&warm);
        let m = &self.manifest;
        let phases = median.len();
        let steps = &median[1..phases - 1];
        let mut p = Profile {
            io_ms: (median[0] + median[phases - 1]) * 1e3,
            ..Profile::default()
        };
        let cold = (!cold.is_empty()).then(|| medians(&cold));
        for (i, (s, &sec)) in m.steps.iter().zip(steps).enumerate() {
            if let Some(t) = s.task {
                p.kernels_ms += sec * 1e3;
                let task = &m.tasks[t];
                if task.gflops > 0.0 {
                    p.kernels_alone_ms += task.flops as f64 / (task.gflops * 1e9) * 1e3;
                }
                if let Some(c) = &cold {
                    *p.kernels_cold_ms.get_or_insert(0.0) += c[i + 1] * 1e3;
                }
            } else if s.how == "layout" {
                p.layout_ms += sec * 1e3;
            } else {
                p.glue_ms += sec * 1e3;
            }
        }
        p.steps_ms = steps.iter().map(|s| s * 1e3).collect();
        Ok(p)
    }
}

/// A timed run's buffers, prepared once: the inputs copied 64-byte aligned (the library reads
/// such inputs where they are, as it would a careful caller's) and the outputs reused, so
/// that what is timed is the library's call, not an allocation and its page faults.
struct Prepared {
    inputs: Vec<Vec<Line>>,
    /// Floats from each input's line start to its first element: 0, aligned.
    offset: usize,
    outputs: Vec<Array>,
}

/// One cache line of floats.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

impl Prepared {
    /// `offset` floats into their first line (below 16).
    fn new(inputs: &[Array], outputs: Vec<Array>, offset: usize) -> Prepared {
        let inputs = inputs
            .iter()
            .map(|a| {
                let mut lines = vec![Line([0.0; 16]); (offset + a.data.len()).div_ceil(16)];
                for (i, &x) in a.data.iter().enumerate() {
                    let j = offset + i;
                    lines[j / 16].0[j % 16] = x;
                }
                lines
            })
            .collect();
        Prepared {
            inputs,
            offset,
            outputs,
        }
    }

    /// The inputs' pointers, valid while `self` is.
    fn ins(&self) -> Vec<*const f32> {
        self.inputs
            .iter()
            .map(|l| l.as_ptr().cast::<f32>().wrapping_add(self.offset))
            .collect()
    }
}

/// Cold runs of a profile: each walks the flush buffer before every step (a 60-step model,
/// 64 MB: about 0.3 s a run).
const COLD_RUNS: usize = 20;

/// The flush's size: twice the last-level cache, within 8 MB and 1 GB. (The tuner's harness
/// evicts a kernel's own arguments instead; the library's profiled run has no list of each
/// step's buffers to evict.)
fn flush_bytes() -> usize {
    let llc = tunehub_engine::target::Target::detect().last_level_cache_bytes();
    (2 * llc).clamp(8 << 20, 1 << 30) as usize
}

/// Each phase's median over `runs` (each one run's phase times).
fn medians(runs: &[Vec<f64>]) -> Vec<f64> {
    (0..runs[0].len())
        .map(|i| {
            let mut v: Vec<f64> = runs.iter().map(|r| r[i]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect()
}

/// Where a run's time goes (medians over profiled runs), in ms.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// The kernels' steps.
    pub kernels_ms: f64,
    /// The same kernels' times as measured alone (their records: FLOPs over GFLOP/s).
    pub kernels_alone_ms: f64,
    /// The same kernels timed in this profile, each from a cold cache as a model's tasks are
    /// tuned: the estimate measured again in the machine's present state (`None`: a library
    /// built before it could).
    pub kernels_cold_ms: Option<f64>,
    /// Views cost nothing; copies, fills and gathers.
    pub glue_ms: f64,
    /// Conversions into and out of the kernels' layouts at the regions' edges.
    pub layout_ms: f64,
    /// Inputs copied into the arena and outputs out of it.
    pub io_ms: f64,
    /// Every step's, in the manifest's order.
    pub steps_ms: Vec<f64>,
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: created by the library's create, destroyed once.
        unsafe { (self.destroy)(self.model) }
    }
}
