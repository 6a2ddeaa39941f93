//! Writing an export to a file without ever leaving a half-written one under its name.

use std::{
    fs::File,
    io::{self, BufWriter, Write},
    path::{Path, PathBuf},
};

/// Writes through `f` into a temporary file beside `path`, syncs it and renames it to `path`.
/// On any error the temporary file is removed and `path` is left as it was.
pub fn write_file(path: &Path, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut out = BufWriter::new(File::create(&tmp)?);
        f(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
