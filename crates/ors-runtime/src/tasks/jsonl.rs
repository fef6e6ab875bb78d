//! JSONL task files: the offset of every row's first byte, found in one pass at open (8 bytes
//! a row, in fixed-size chunks so building it never copies the index); a row is read with one
//! positioned read and parsed when asked for.

use std::fs::File;
use std::io::Read;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::source::{check_range, DataError, TaskSource};

/// Offsets per chunk of the index: 512 KiB chunks, allocated once each.
const CHUNK: usize = 1 << 16;
/// Bytes read at a time while indexing.
const READ_BUF: usize = 4 << 20;

/// The row offsets of a file, in chunks of [`CHUNK`].
#[derive(Default)]
struct LineIndex {
    chunks: Vec<Vec<u64>>,
    len: usize,
}

impl LineIndex {
    fn push(&mut self, offset: u64) {
        if self.len % CHUNK == 0 {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.push(offset);
        }
        self.len += 1;
    }

    fn get(&self, row: usize) -> u64 {
        self.chunks[row / CHUNK][row % CHUNK]
    }
}

/// A JSONL file of tasks, indexed at open.
pub struct JsonlTasks<T> {
    path: PathBuf,
    file: File,
    index: LineIndex,
    file_len: u64,
    _task: PhantomData<fn() -> T>,
}

impl<T> JsonlTasks<T> {
    /// Open and index a file: one JSON value a line (`\n` or `\r\n`), blank lines skipped,
    /// a UTF-8 byte order mark at the start ignored.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, DataError> {
        let path = path.as_ref().to_owned();
        let mut file = File::open(&path).map_err(DataError::io(&path))?;
        let mut index = LineIndex::default();
        let mut buf = vec![0u8; READ_BUF];
        // Where the current line starts, and whether it has anything but whitespace so far.
        let mut line_start: u64 = 0;
        let mut has_content = false;
        let mut pos: u64 = 0;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(DataError::io(&path)(e)),
            };
            let mut bytes = &buf[..n];
            let mut base = pos;
            // A byte order mark at the very start of the file.
            if let (0, Some(rest)) = (pos, bytes.strip_prefix(b"\xEF\xBB\xBF")) {
                bytes = rest;
                base += 3;
                line_start = 3;
            }
            // Each line's part in this read: whether it has more than whitespace, whether it
            // ends the line.
            let mut seg_start = 0usize;
            let ends = memchr::memchr_iter(b'\n', bytes).map(|nl| nl + 1);
            for end in ends.chain([bytes.len()]) {
                let part = &bytes[seg_start..end];
                seg_start = end;
                has_content = has_content || part.iter().any(|b| !b.is_ascii_whitespace());
                if part.ends_with(b"\n") {
                    if has_content {
                        index.push(line_start);
                    }
                    line_start = base + end as u64;
                    has_content = false;
                }
            }
            pos += n as u64;
        }
        if has_content {
            index.push(line_start);
        }
        Ok(Self {
            path,
            file,
            index,
            file_len: pos,
            _task: PhantomData,
        })
    }

    /// Where row `row` ends: where the next one starts, or the end of the file.
    fn end_of(&self, row: usize) -> u64 {
        if row + 1 < self.index.len {
            self.index.get(row + 1)
        } else {
            self.file_len
        }
    }
}

impl<T: DeserializeOwned + 'static> TaskSource<T> for JsonlTasks<T> {
    fn len(&self) -> usize {
        self.index.len
    }

    /// Rows `start..stop`, read in one positioned read and parsed.
    fn read(&self, start: usize, stop: usize) -> Result<Vec<T>, DataError> {
        check_range(&self.path, start, stop, self.index.len)?;
        if start == stop {
            return Ok(Vec::new());
        }
        let from = self.index.get(start);
        let mut bytes = vec![0u8; (self.end_of(stop - 1) - from) as usize];
        read_at(&self.file, &mut bytes, from).map_err(DataError::io(&self.path))?;
        let mut rows = Vec::with_capacity(stop - start);
        for row in start..stop {
            let a = (self.index.get(row) - from) as usize;
            let b = (self.end_of(row) - from) as usize;
            let task = serde_json::from_slice(&bytes[a..b]);
            rows.push(task.map_err(|e| DataError::row(&self.path, row, e))?);
        }
        Ok(rows)
    }
}

/// Fill `buf` from `offset` without moving a shared cursor, so reads from many threads need no
/// lock.
#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Row {
        n: u64,
    }

    fn temp(name: &str, content: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "ors-jsonl-{}-{name}-{:?}.jsonl",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, content).unwrap();
        path
    }

    #[test]
    fn blank_lines_crlf_bom_and_a_last_line_without_newline() {
        let path = temp(
            "edge",
            b"\xEF\xBB\xBF{\"n\": 0}\r\n\r\n  \n{\"n\": 1}\n\n{\"n\": 2}",
        );
        let file = JsonlTasks::<Row>::open(&path).unwrap();
        assert_eq!(file.len(), 3);
        let rows = file.read(0, 3).unwrap();
        assert_eq!(rows, [Row { n: 0 }, Row { n: 1 }, Row { n: 2 }]);
        assert_eq!(file.read(2, 3).unwrap(), [Row { n: 2 }]);
        assert!(file.read(1, 1).unwrap().is_empty());
        assert!(matches!(
            file.read(2, 4),
            Err(DataError::OutOfRange { len: 3, .. })
        ));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn rows_across_read_buffers_and_index_chunks() {
        // More rows than one index chunk, and lines that straddle the 4 MiB read buffer.
        let rows = CHUNK + 1000;
        let pad = "x".repeat(40);
        let text: String = (0..rows)
            .map(|n| format!("{{\"n\": {n}, \"pad\": \"{pad}\"}}\n"))
            .collect();
        let path = temp("big", text.as_bytes());
        let file = JsonlTasks::<Row>::open(&path).unwrap();
        assert_eq!(file.len(), rows);
        for n in [0, 1, CHUNK - 1, CHUNK, CHUNK + 500, rows - 1] {
            assert_eq!(file.read(n, n + 1).unwrap(), [Row { n: n as u64 }]);
        }
        let some = file.read(CHUNK - 2, CHUNK + 2).unwrap();
        assert_eq!(some.len(), 4);
        assert_eq!(
            some[3],
            Row {
                n: CHUNK as u64 + 1
            }
        );
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_bad_row_names_file_and_row() {
        let path = temp("bad", b"{\"n\": 0}\n{\"n\": \"zero\"}\n");
        let file = JsonlTasks::<Row>::open(&path).unwrap();
        let err = file.read(0, 2).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("row 1: invalid type"), "{msg}");
        assert!(msg.contains(path.to_str().unwrap()), "{msg}");
        std::fs::remove_file(path).unwrap();
    }
}
