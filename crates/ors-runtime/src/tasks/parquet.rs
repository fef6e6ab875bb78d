//! Parquet task files (cargo feature `parquet`): only the footer is read at open; a request
//! decodes the row group holding its rows, up to the last one it needs, and nothing is cached,
//! so memory stays flat whatever the file's size. Columns map to the task's fields by name
//! through serde (a row is turned into a JSON object first).

use std::fs::File;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde::de::DeserializeOwned;

use super::source::{check_range, DataError, TaskSource};

/// A Parquet file of tasks.
pub struct ParquetTasks<T> {
    path: PathBuf,
    reader: SerializedFileReader<File>,
    /// The first row of each row group, then the total.
    starts: Vec<usize>,
    _task: PhantomData<fn() -> T>,
}

impl<T> ParquetTasks<T> {
    /// Open a file, reading only its footer (the schema and the row groups' sizes).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, DataError> {
        let path = path.as_ref().to_owned();
        let file = File::open(&path).map_err(DataError::io(&path))?;
        let reader = SerializedFileReader::new(file)
            .map_err(|e| DataError::format(&path, format!("not a readable Parquet file: {e}")))?;
        let groups = reader.metadata().row_groups().iter();
        let sizes = groups.map(|g| usize::try_from(g.num_rows()).unwrap_or(0));
        let ends = sizes.scan(0usize, |total, n| {
            *total += n;
            Some(*total)
        });
        let starts = std::iter::once(0).chain(ends).collect();
        Ok(Self {
            path,
            reader,
            starts,
            _task: PhantomData,
        })
    }
}

impl<T: DeserializeOwned + 'static> TaskSource<T> for ParquetTasks<T> {
    fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Rows `start..stop`, decoded from the row groups that hold them.
    fn read(&self, start: usize, stop: usize) -> Result<Vec<T>, DataError> {
        check_range(&self.path, start, stop, self.len())?;
        let mut rows = Vec::with_capacity(stop - start);
        let mut row = start;
        let fail = |e: parquet::errors::ParquetError| DataError::format(&self.path, e);
        while row < stop {
            // The row group holding `row`: `starts` is sorted, and the group is the last one
            // starting at or before `row`.
            let group = self.starts.partition_point(|&s| s <= row) - 1;
            let (group_start, group_end) = (self.starts[group], self.starts[group + 1]);
            let take = stop.min(group_end) - row;
            let reader = self.reader.get_row_group(group).map_err(fail)?;
            let iter = reader.get_row_iter(None).map_err(fail)?;
            for (i, r) in iter.skip(row - group_start).take(take).enumerate() {
                let r = r.map_err(fail)?;
                let task = serde_json::from_value(r.to_json_value());
                rows.push(task.map_err(|e| DataError::row(&self.path, row + i, e))?);
            }
            if rows.len() != row - start + take {
                return Err(DataError::format(
                    &self.path,
                    format!("row group {group} holds fewer rows than its metadata says"),
                ));
            }
            row += take;
        }
        Ok(rows)
    }
}

/// Write a Parquet file of string columns (Snappy-compressed, `rows_per_group` rows a row
/// group): for tests and tools that generate task sets.
pub fn write_parquet<I>(
    path: impl AsRef<Path>,
    columns: &[&str],
    rows: I,
    rows_per_group: usize,
) -> Result<usize, DataError>
where
    I: IntoIterator<Item = Vec<String>>,
{
    let path = path.as_ref();
    let err = |e: &dyn std::fmt::Display| DataError::format(path, e);
    let fields = columns
        .iter()
        .map(|name| {
            Type::primitive_type_builder(name, PhysicalType::BYTE_ARRAY)
                .with_repetition(Repetition::REQUIRED)
                .with_converted_type(parquet::basic::ConvertedType::UTF8)
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(&e))?;
    let schema = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map_err(|e| err(&e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let file = File::create(path).map_err(DataError::io(path))?;
    let mut writer =
        SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props)).map_err(|e| err(&e))?;
    let mut total = 0usize;
    let mut rows = rows.into_iter().peekable();
    let per_group = rows_per_group.max(1);
    while rows.peek().is_some() {
        let mut cols: Vec<Vec<ByteArray>> = vec![Vec::with_capacity(per_group); columns.len()];
        for row in rows.by_ref().take(per_group) {
            if row.len() != columns.len() {
                return Err(err(&format!(
                    "row {total} has {} values for {} columns",
                    row.len(),
                    columns.len()
                )));
            }
            for (col, value) in cols.iter_mut().zip(row) {
                col.push(ByteArray::from(value.into_bytes()));
            }
            total += 1;
        }
        let mut group = writer.next_row_group().map_err(|e| err(&e))?;
        for values in &cols {
            let Some(mut col) = group.next_column().map_err(|e| err(&e))? else {
                return Err(err(&"the schema has fewer columns than the rows"));
            };
            col.typed::<ByteArrayType>()
                .write_batch(values, None, None)
                .map_err(|e| err(&e))?;
            col.close().map_err(|e| err(&e))?;
        }
        group.close().map_err(|e| err(&e))?;
    }
    writer.close().map_err(|e| err(&e))?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Problem {
        question: String,
        answer: String,
    }

    #[test]
    fn rows_map_to_tasks_across_row_groups() {
        let path = std::env::temp_dir().join(format!("ors-pq-{}.parquet", std::process::id()));
        let rows = (0..2500).map(|i| vec![format!("q{i}"), i.to_string()]);
        assert_eq!(
            write_parquet(&path, &["question", "answer"], rows, 1000).unwrap(),
            2500
        );
        let file = ParquetTasks::<Problem>::open(&path).unwrap();
        assert_eq!(file.len(), 2500);
        assert_eq!(file.starts, [0, 1000, 2000, 2500]);
        let one = file.read(1999, 2000).unwrap();
        assert_eq!(
            one,
            [Problem {
                question: "q1999".into(),
                answer: "1999".into()
            }]
        );
        // A range across two row-group boundaries.
        let some = file.read(990, 2010).unwrap();
        assert_eq!(some.len(), 1020);
        assert_eq!(some[0].question, "q990");
        assert_eq!(some[1019].question, "q2009");
        assert_eq!(file.read(2499, 2500).unwrap()[0].answer, "2499");
        assert!(file.read(2499, 2501).is_err());
        // A column the task does not have is an error naming the row.
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Other {
            missing: String,
        }
        let other = ParquetTasks::<Other>::open(&path).unwrap();
        let err = other.read(5, 6).unwrap_err().to_string();
        assert!(err.contains("row 5: missing field `missing`"), "{err}");
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_file_that_is_not_parquet_is_a_format_error() {
        let path = std::env::temp_dir().join(format!("ors-notpq-{}.parquet", std::process::id()));
        std::fs::write(&path, b"{\"question\": \"q\"}\n").unwrap();
        let err = ParquetTasks::<Problem>::open(&path).err().unwrap();
        assert!(matches!(err, DataError::Format { .. }), "{err:?}");
        std::fs::remove_file(path).unwrap();
    }
}
