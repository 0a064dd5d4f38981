//! A compiled model's files from the service (`Query.BuildModel`), written into a directory:
//! what `tunehub build` and the network benchmark ask for, the server having extracted the
//! tasks, answered each (tuned record, else zero-shot) and written the C, header, weights and
//! manifest.
//!
//! The answer is checked at the door: every file a bare name, its pieces together, each file
//! written whole (a temporary name, then a rename) and the manifest last, so a directory never
//! holds half a model; an answer that ends before its summary is an error.

use crate::client::Clients;
use crate::usage::status_error;
use anyhow::{Context, Result, bail};
use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use tunehub_onnx::InputShapes;
use tunehub_proto::v1 as pb;

/// The request's model: the file's bytes and the input shapes as given.
pub fn source(onnx: Vec<u8>, shapes: &InputShapes) -> pb::ModelSource {
    pb::ModelSource {
        onnx,
        batch: shapes.batch,
        shapes: shapes
            .shapes
            .iter()
            .map(|(name, dims)| pb::InputShape {
                name: name.clone(),
                dims: dims.clone(),
            })
            .collect(),
        ..Default::default()
    }
}

/// Asks the service to build `req` and writes the files into `dir`, created with the first
/// file (a refused build leaves no directory behind).
pub async fn receive(
    clients: &mut Clients,
    req: pb::BuildModelRequest,
    dir: &Path,
) -> Result<pb::BuildModelSummary> {
    let mut stream = clients
        .query
        .build_model(req)
        .await
        .map_err(status_error)?
        .into_inner();
    let mut done: HashSet<String> = HashSet::new();
    let mut open: Option<Open> = None;
    while let Some(piece) = stream.message().await.map_err(status_error)? {
        if let Some(summary) = piece.summary {
            if let Some(f) = open.take() {
                f.finish()?;
            }
            return Ok(summary);
        }
        if open.as_ref().is_some_and(|f| f.name != piece.file) {
            let f = open.take().expect("checked");
            done.insert(f.name.clone());
            f.finish()?;
        }
        if open.is_none() {
            check_name(&piece.file)?;
            if done.contains(&piece.file) {
                bail!("the service sent {} twice", piece.file);
            }
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            open = Some(Open::create(dir, &piece.file)?);
        }
        let f = open.as_mut().expect("opened above");
        f.file
            .write_all(&piece.data)
            .with_context(|| format!("writing {}", f.tmp.display()))?;
    }
    if let Some(f) = open {
        let _ = std::fs::remove_file(&f.tmp);
    }
    bail!("the service's answer ended before its summary: the build is incomplete")
}

/// A file being received, under a temporary name beside its own.
struct Open {
    name: String,
    tmp: PathBuf,
    path: PathBuf,
    file: File,
}

impl Open {
    fn create(dir: &Path, name: &str) -> Result<Open> {
        let path = dir.join(name);
        let tmp = dir.join(format!("{name}.tmp"));
        let file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        Ok(Open {
            name: name.to_string(),
            tmp,
            path,
            file,
        })
    }

    fn finish(self) -> Result<()> {
        self.file
            .sync_all()
            .with_context(|| format!("writing {}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.path)
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// A file name from the service: a bare name that stays in the directory.
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        bail!("the service sent a file named {name:?}: not a bare file name");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_name;

    #[test]
    fn only_bare_names_are_written() {
        for ok in ["model.c", "libmodel.so", "manifest.json", "net_1.weights"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "../x",
            "a/b",
            "/etc/passwd",
            "..",
            ".hidden",
            "a\\b",
            "a b",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
