//! `attributes.system.files`: the files a job carries in its jobspec (RFC 37
//! file objects by name, as `--add-file` and `batch` write them), which the
//! job shell extracts into the job's temporary directory before its tasks
//! start.

use base64::Engine;
use serde_json::Value;

use super::error::{JobspecError, join};

/// The file type bits of a mode, as `stat(2)` gives them.
const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;

/// One file a job carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFile {
    /// Where it goes, relative to the job's temporary directory; checked to
    /// stay inside it.
    pub name: String,
    /// Permission bits.
    pub perms: u32,
    /// What it is.
    pub kind: FileKind,
}

/// What a [`JobFile`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file and its contents.
    Regular(Vec<u8>),
    /// A directory.
    Directory,
    /// A symbolic link and its target.
    Symlink(String),
}

/// Parse `attributes.system.files` (at `path`), in name order.
pub(crate) fn parse_files(v: &Value, path: &str) -> Result<Vec<JobFile>, JobspecError> {
    let obj = v
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type(path, "an object (name: file)", v))?;
    obj.iter()
        .map(|(name, file)| parse_file(name, file, &join(path, name)))
        .collect()
}

fn parse_file(name: &str, v: &Value, path: &str) -> Result<JobFile, JobspecError> {
    check_name(name).map_err(|why| JobspecError::invalid(path, why))?;
    let obj = v
        .as_object()
        .ok_or_else(|| JobspecError::wrong_type(path, "an RFC 37 file object", v))?;
    if obj.contains_key("blobref") || obj.contains_key("blobvec") {
        return Err(JobspecError::invalid(
            path,
            "files by blobref are not supported: carry the data in the jobspec",
        ));
    }
    let mode = match obj.get("mode") {
        None => S_IFREG | 0o644,
        Some(m) => m
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .ok_or_else(|| JobspecError::wrong_type(&join(path, "mode"), "a file mode", m))?,
    };
    let data = || -> Result<Vec<u8>, JobspecError> {
        let Some(d) = obj.get("data") else {
            return Ok(Vec::new());
        };
        let dp = join(path, "data");
        let text = match d {
            Value::String(t) => t,
            // RFC 37: JSON data without an encoding is written as JSON text
            // (flux's `conf.json` of batch and alloc).
            Value::Object(_) | Value::Array(_) if !obj.contains_key("encoding") => {
                return Ok(d.to_string().into_bytes());
            }
            other => return Err(JobspecError::wrong_type(&dp, "a string or JSON", other)),
        };
        match obj.get("encoding").and_then(Value::as_str) {
            None | Some("utf-8") => Ok(text.as_bytes().to_vec()),
            Some("base64") => base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| JobspecError::invalid(&dp, format!("not base64: {e}"))),
            Some(other) => Err(JobspecError::invalid(
                &join(path, "encoding"),
                format!("unknown encoding {other:?} (utf-8 or base64)"),
            )),
        }
    };
    let kind = match mode & S_IFMT {
        S_IFDIR => FileKind::Directory,
        S_IFLNK => FileKind::Symlink(String::from_utf8_lossy(&data()?).into_owned()),
        // A mode with permission bits only names a regular file.
        0 | S_IFREG => FileKind::Regular(data()?),
        _ => {
            return Err(JobspecError::invalid(
                &join(path, "mode"),
                format!("{mode:o} is not a regular file, a directory or a symbolic link"),
            ));
        }
    };
    Ok(JobFile {
        name: name.to_string(),
        perms: mode & 0o7777,
        kind,
    })
}

/// A name must stay inside the directory it is extracted to.
fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("a file needs a name");
    }
    if name.starts_with('/') {
        return Err("a file's name must be relative");
    }
    if name.contains('\0') {
        return Err("a file's name may not hold a NUL");
    }
    if name.split('/').any(|c| c == "..") {
        return Err("a file's name may not hold `..`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(v: Value) -> Result<Vec<JobFile>, String> {
        parse_files(&v, "attributes.system.files").map_err(|e| e.to_string())
    }

    #[test]
    fn the_forms_add_file_and_batch_write() {
        let files = parse(json!({
            "script": {"mode": 0o100700, "data": "#!/bin/sh\ntrue\n", "encoding": "utf-8"},
            "bin": {"mode": 0o100644, "size": 3, "data": "AAEC", "encoding": "base64"},
            "d/sub": {"mode": 0o040755},
            "link": {"mode": 0o120777, "data": "script"},
            "plain": {"data": "x"},
            "conf.json": {"mode": 0o100600, "data": {"a": 1}},
        }))
        .unwrap();
        let by = |n: &str| files.iter().find(|f| f.name == n).unwrap().clone();
        assert_eq!(by("script").perms, 0o700);
        assert_eq!(
            by("script").kind,
            FileKind::Regular(b"#!/bin/sh\ntrue\n".to_vec())
        );
        assert_eq!(by("bin").kind, FileKind::Regular(vec![0, 1, 2]));
        assert_eq!(by("d/sub").kind, FileKind::Directory);
        assert_eq!(by("link").kind, FileKind::Symlink("script".into()));
        assert_eq!(by("plain").perms, 0o644);
        assert_eq!(
            by("conf.json").kind,
            FileKind::Regular(br#"{"a":1}"#.to_vec())
        );
    }

    #[test]
    fn names_that_leave_the_directory_and_bad_objects_are_refused() {
        for (files, words) in [
            (json!({"/etc/passwd": {"data": "x"}}), "relative"),
            (json!({"a/../../x": {"data": "x"}}), "`..`"),
            (json!({"..": {"data": "x"}}), "`..`"),
            (json!({"": {"data": "x"}}), "needs a name"),
            (json!({"x": {"data": "!!", "encoding": "base64"}}), "base64"),
            (
                json!({"x": {"data": "x", "encoding": "rot13"}}),
                "unknown encoding",
            ),
            (json!({"x": {"mode": 0o060644}}), "not a regular file"),
            (json!({"x": {"blobref": "sha1-00"}}), "blobref"),
            (json!({"x": "text"}), "RFC 37"),
            (json!(["x"]), "an object"),
        ] {
            let e = parse(files.clone()).unwrap_err();
            assert!(e.contains(words), "{files}: {e}");
        }
    }
}
