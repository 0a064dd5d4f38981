//! A built model loaded in this process: its manifest read, `libNAME.so` opened, the model
//! created on its weights file; `run` takes and returns dense float32 arrays.

use crate::Manifest;
use crate::emit::manifest::FORMAT;
use crate::error::CompileError;
use std::ffi::{CString, c_char, c_int, c_void};
use std::path::Path;
use tunehub_onnx::reference::Array;

type Create = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type Run = unsafe extern "C" fn(*mut c_void, *const *const f32, *const *mut f32) -> c_int;
type Destroy = unsafe extern "C" fn(*mut c_void);
type SetThreads = unsafe extern "C" fn(c_int);
type LastError = unsafe extern "C" fn() -> *const c_char;

pub struct Library {
    pub manifest: Manifest,
    model: *mut c_void,
    run: Run,
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
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path).map_err(|source| CompileError::Io {
            what: "reading",
            path: path.display().to_string(),
            source,
        })?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
            fail(format!(
                "{}: not a tunehub model manifest: {e}",
                path.display()
            ))
        })?;
        if manifest.format != FORMAT {
            return Err(fail(format!(
                "{}: manifest format {}, this tunehub reads {FORMAT}: build the model again",
                path.display(),
                manifest.format
            )));
        }
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
        let (create, run, destroy, set_threads, last_error) = unsafe {
            let sym = |s: &str| format!("{name}_{s}").into_bytes();
            let c: libloading::Symbol<Create> = lib.get(&sym("create")).map_err(bad)?;
            let r: libloading::Symbol<Run> = lib.get(&sym("run")).map_err(bad)?;
            let d: libloading::Symbol<Destroy> = lib.get(&sym("destroy")).map_err(bad)?;
            let t: libloading::Symbol<SetThreads> =
                lib.get(&sym("set_num_threads")).map_err(bad)?;
            let l: libloading::Symbol<LastError> = lib.get(&sym("last_error")).map_err(bad)?;
            (*c, *r, *d, *t, *l)
        };
        let weights = dir.join(&manifest.weights);
        let c_path = CString::new(weights.to_string_lossy().into_owned())
            .map_err(|_| fail("the weights path has a NUL byte"))?;
        // SAFETY: a valid C string; the function returns NULL or a model we own.
        let model = unsafe { create(c_path.as_ptr()) };
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
        let mut outputs: Vec<Array> = m
            .outputs
            .iter()
            .map(|io| {
                let shape: Vec<usize> = io.shape.iter().map(|&d| d as usize).collect();
                Array {
                    data: vec![0.0; shape.iter().product()],
                    shape,
                }
            })
            .collect();
        let ins: Vec<*const f32> = inputs.iter().map(|a| a.data.as_ptr()).collect();
        let outs: Vec<*mut f32> = outputs.iter_mut().map(|a| a.data.as_mut_ptr()).collect();
        // SAFETY: every pointer has the manifest's element count (checked above); the model is
        // ours and used from one thread at a time (`&mut self`).
        let rc = unsafe { (self.run)(self.model, ins.as_ptr(), outs.as_ptr()) };
        if rc != 0 {
            return Err(fail(format!("{}_run failed ({rc})", m.name)));
        }
        Ok(outputs)
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: created by the library's create, destroyed once.
        unsafe { (self.destroy)(self.model) }
    }
}
