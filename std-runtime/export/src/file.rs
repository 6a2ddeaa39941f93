//! Writing an export to a file without ever leaving a half-written one under its name.

use std::{
    fs::{File, OpenOptions},
    io::{self, BufWriter, Write},
    path::{Path, PathBuf},
};

/// Writes through `f` into a temporary file beside `path`, syncs it and renames it to `path`.
/// On any error the temporary file is removed and `path` is left as it was.
///
/// A `path` that exists and is not a regular file (a device such as `/dev/null`, a named pipe,
/// a symbolic link such as `/dev/stdout`) is written through as it is: a file renamed over it
/// would replace the device, the pipe or the link itself.
pub fn write_file(path: &Path, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        let mut out = BufWriter::new(OpenOptions::new().write(true).truncate(true).open(path)?);
        f(&mut out)?;
        return out.flush();
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("waffle-write-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_regular_file_is_replaced_whole_or_left_alone() {
        let dir = scratch("regular");
        let path = dir.join("out.json");
        std::fs::write(&path, "old").unwrap();
        let failed = write_file(&path, |out: &mut dyn Write| {
            out.write_all(b"half")?;
            Err(io::Error::other("the exporter failed"))
        });
        assert!(failed.is_err());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "old",
            "a failed export leaves the file as it was"
        );
        assert!(!dir.join("out.json.partial").exists(), "and no temporary file");
        write_file(&path, |out: &mut dyn Write| out.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_written_through_not_replaced() {
        let dir = scratch("link");
        let (target, link) = (dir.join("target.json"), dir.join("link.json"));
        std::fs::write(&target, "old contents, longer than the new").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_file(&link, |out: &mut dyn Write| out.write_all(b"new")).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new", "what it points to gets the export");
        assert!(!dir.join("link.json.partial").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
