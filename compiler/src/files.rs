//! Files written whole: through a temporary name beside them and a rename, so that a reader
//! never sees half of one.

use crate::error::CompileError;
use std::path::{Path, PathBuf};

/// Writes `path` through a temporary file beside it and a rename: never half a file.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), CompileError> {
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".tmp");
    let io = |what, p: &Path| {
        let p = p.display().to_string();
        move |source| CompileError::Io {
            what,
            path: p,
            source,
        }
    };
    std::fs::write(&tmp, bytes).map_err(io("writing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io("writing", path))
}
