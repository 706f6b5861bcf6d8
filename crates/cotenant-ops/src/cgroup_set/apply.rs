//! [`apply`]: the planned writes, in order, each one `write(2)` followed by a read-back that
//! must show the value written.

use super::{read::read_file, Error, Write};
use crate::cgroupfs::{os_error, ControlDir};

/// Makes the writes in order, each followed by a read-back that must show the value written
/// (compared field by field, ignoring white space).
pub fn apply(dir: &ControlDir, writes: &[Write]) -> Result<(), Error> {
    for (i, w) in writes.iter().enumerate() {
        let result = write_one(dir, w).and_then(|()| read_back(dir, w));
        if let Err(error) = result {
            if i == 0 {
                return Err(error);
            }
            let done = writes[..i].iter().map(|d| format!("{} {:?}", d.file, d.new)).collect();
            return Err(Error::AfterWrites { done, error: Box::new(error) });
        }
    }
    Ok(())
}

/// One write, as one `write(2)` of the whole text to the existing file (never created, never
/// through a symbolic link).
fn write_one(dir: &ControlDir, w: &Write) -> Result<(), Error> {
    let file = dir.path().join(w.file);
    dir.write(w.file, &w.new).map_err(|why| match os_error(&why) {
        Some(libc::EACCES | libc::EPERM) => Error::PermissionDenied(file),
        Some(libc::EINVAL) => Error::Refused { file, value: w.new.clone() },
        Some(libc::ENOENT) => Error::NoSuchCgroup(dir.path().to_owned()),
        _ => Error::Access(why),
    })
}

fn read_back(dir: &ControlDir, w: &Write) -> Result<(), Error> {
    let read = read_file(dir, w.file)?.ok_or_else(|| Error::NoSuchCgroup(dir.path().to_owned()))?;
    if read.split_ascii_whitespace().eq(w.new.split_ascii_whitespace()) {
        Ok(())
    } else {
        let file = dir.path().join(w.file);
        Err(Error::Mismatch { file, written: w.new.clone(), read: read.trim().to_owned() })
    }
}
