//! A flush's sample rows: which series each goes to, and its INSERTs in either schema.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;

use rusqlite::{params, CachedStatement, Connection};

use crate::error::Result;
use crate::model::{SampleKind, SampleRow, Series};
use crate::store::codec::{encode, Chain, State2};
use crate::store::fault::db_err;
use crate::store::reader::load_state2;
use crate::store::schema::{self, NVALUES, VALUE_COLUMNS};
use crate::store::{kind_code, step_row_is_redundant, StepInfo};

/// The series id `row` is stored under, registering its step on the step's first row; `None`
/// for a periodic step row the job series already says (see `step_row_is_redundant`).
pub(super) fn series_of(
    conn: &Connection,
    path: &Path,
    row: &SampleRow,
    ids: &mut Vec<i64>,
    infos: &mut Vec<StepInfo>,
) -> Result<Option<i64>> {
    match &row.series {
        Series::Job => Ok(Some(0)),
        Series::Step(name) => {
            let id = ensure_step(conn, path, name, row.t_unix_ms, ids, infos)?;
            if row.kind == SampleKind::Periodic && step_row_is_redundant(name, row.t_unix_ms, infos)
            {
                return Ok(None);
            }
            Ok(Some(id))
        }
    }
}

/// One flush's prepared sample INSERTs, inside its transaction.
pub(super) struct SampleInserts<'t> {
    conn: &'t Connection,
    path: &'t Path,
    /// `meta.started_unix_ms`: rows store their time relative to it.
    base: i64,
    insert: CachedStatement<'t>,
    /// Schema 2's `samples_rare`; `None` in a schema-1 file.
    insert_rare: Option<CachedStatement<'t>>,
    /// The file's schema: a file of an older one keeps it, so only its columns are written.
    version: i64,
}

impl<'t> SampleInserts<'t> {
    pub(super) fn prepare(
        conn: &'t Connection,
        path: &'t Path,
        base: i64,
        version: i64,
    ) -> Result<Self> {
        let v1 = version == 1;
        let insert = conn
            .prepare_cached(insert_sql(version))
            .map_err(|e| db_err(path, e))?;
        let insert_rare = if v1 {
            None
        } else {
            Some(
                conn.prepare_cached(insert_rare_sql(version))
                    .map_err(|e| db_err(path, e))?,
            )
        };
        Ok(SampleInserts {
            conn,
            path,
            base,
            insert,
            insert_rare,
            version,
        })
    }

    /// Schema 2: the row packed against its series' state (loaded from the file on first
    /// use), its main columns in `samples_packed` and, when it carries any, its rare ones in
    /// `samples_rare` under the same id.
    pub(super) fn insert_v2(
        &mut self,
        row: &SampleRow,
        series: i64,
        states: &mut HashMap<i64, State2>,
    ) -> Result<()> {
        let (conn, path, version) = (self.conn, self.path, self.version);
        if let Entry::Vacant(e) = states.entry(series) {
            e.insert(load_state2(conn, path, version, series)?);
        }
        let kind = kind_code(row.kind);
        let mut abs = encode(row);
        // Columns the file's schema lacks stay unreadable, so the chain matches the file's.
        abs[schema::nvalues_in(version)..].fill(None);
        let packed = states.get_mut(&series).expect("inserted").encode(
            row.t_unix_ms - self.base,
            kind,
            &abs,
        );
        let (p, n) = statement_params(
            [packed.t_ms, series],
            schema::main_columns(version),
            &packed.values,
        );
        self.insert
            .execute(rusqlite::params_from_iter(p[..n].iter()))
            .map_err(|e| db_err(path, e))?;
        if packed.rare {
            let id = conn.last_insert_rowid();
            let (p, n) =
                statement_params([id, kind], schema::rare_columns(version), &packed.values);
            self.insert_rare
                .as_mut()
                .expect("schema 2")
                .execute(rusqlite::params_from_iter(p[..n].iter()))
                .map_err(|e| db_err(path, e))?;
        }
        Ok(())
    }

    /// Schema 1: every column, as a delta against its series' chain (loaded on first use).
    pub(super) fn insert_v1(
        &mut self,
        row: &SampleRow,
        series: i64,
        chains: &mut HashMap<i64, Chain>,
    ) -> Result<()> {
        let (conn, path) = (self.conn, self.path);
        if let Entry::Vacant(e) = chains.entry(series) {
            e.insert(load_chain(conn, path, series)?);
        }
        let stored = chains
            .get_mut(&series)
            .expect("inserted")
            .delta(&encode(row));
        let n = schema::nvalues_in(1);
        let mut p: [Option<i64>; NVALUES + 3] = [None; NVALUES + 3];
        p[0] = Some(row.t_unix_ms - self.base);
        p[1] = Some(series);
        p[2] = Some(kind_code(row.kind));
        p[3..3 + n].copy_from_slice(&stored[..n]);
        self.insert
            .execute(rusqlite::params_from_iter(p[..3 + n].iter()))
            .map_err(|e| db_err(path, e))?;
        Ok(())
    }
}

/// The series id of `name`, registering the step (started at `t`) if this is its first row.
fn ensure_step(
    conn: &Connection,
    path: &Path,
    name: &str,
    t_unix_ms: i64,
    ids: &mut Vec<i64>,
    infos: &mut Vec<StepInfo>,
) -> Result<i64> {
    if let Some(i) = infos.iter().position(|s| s.step == name) {
        return Ok(ids[i]);
    }
    conn.execute(
        "INSERT INTO steps(step, started_unix_ms) VALUES (?1, ?2)",
        params![name, t_unix_ms],
    )
    .map_err(|e| db_err(path, e))?;
    let id = conn.last_insert_rowid();
    ids.push(id);
    infos.push(StepInfo {
        step: name.to_string(),
        started_unix_ms: Some(t_unix_ms),
        ended_unix_ms: None,
        tasks: None,
        exit_status: None,
    });
    Ok(id)
}

/// The chain state of a series = the running sums of its stored columns.
fn load_chain(conn: &Connection, path: &Path, series: i64) -> Result<Chain> {
    let sums: Vec<String> = VALUE_COLUMNS[..schema::nvalues_in(1)]
        .iter()
        .map(|(c, _, _)| format!("SUM({c})"))
        .collect();
    let sql = format!(
        "SELECT {} FROM samples_packed WHERE series = ?1",
        sums.join(", ")
    );
    conn.query_row(&sql, [series], |r| {
        let mut v = [None; NVALUES];
        for (i, slot) in v[..schema::nvalues_in(1)].iter_mut().enumerate() {
            *slot = r.get::<_, Option<i64>>(i)?;
        }
        Ok(Chain::from_sums(v))
    })
    .map_err(|e| db_err(path, e))
}

/// `INSERT INTO table(keys…, columns…) VALUES (?, …)`: the one shape of every sample insert.
fn insert_statement<'c>(table: &str, keys: &str, columns: impl Iterator<Item = &'c str>) -> String {
    let columns: Vec<&str> = columns.collect();
    let marks = vec!["?"; keys.split(", ").count() + columns.len()].join(", ");
    format!(
        "INSERT INTO {table}({keys}, {}) VALUES ({marks})",
        columns.join(", ")
    )
}

/// Each schema's (`samples_packed`, `samples_rare`) INSERTs, built once per process, not at
/// every flush (the text is also the statement cache's key). Schema 1: `t_ms`, `series`,
/// `kind` and every value column it has, and no `samples_rare`; later ones: `t_ms`, `series`
/// and the main value columns, then `id`, `kind` and the rare ones.
static INSERTS: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
    let name = |i: usize| VALUE_COLUMNS[i].0;
    (1..=schema::SCHEMA_VERSION)
        .map(|v| {
            if v == 1 {
                let all = (0..schema::nvalues_in(1)).map(name);
                return (
                    insert_statement("samples_packed", "t_ms, series, kind", all),
                    String::new(),
                );
            }
            (
                insert_statement("samples_packed", "t_ms, series", {
                    schema::main_columns(v).map(name)
                }),
                insert_statement(
                    "samples_rare",
                    "id, kind",
                    schema::rare_columns(v).map(name),
                ),
            )
        })
        .collect()
});

fn insert_sql(version: i64) -> &'static str {
    &INSERTS[(version - 1) as usize].0
}

fn insert_rare_sql(version: i64) -> &'static str {
    &INSERTS[(version - 1) as usize].1
}

/// One schema-2 `INSERT`'s parameters: its two leading keys, then the packed values of
/// `columns` in table order; the count used is returned beside the array.
fn statement_params(
    keys: [i64; 2],
    columns: impl Iterator<Item = usize>,
    values: &[Option<i64>; NVALUES],
) -> ([Option<i64>; NVALUES + 2], usize) {
    let mut p = [None; NVALUES + 2];
    p[0] = Some(keys[0]);
    p[1] = Some(keys[1]);
    let mut n = 2;
    for i in columns {
        p[n] = values[i];
        n += 1;
    }
    (p, n)
}
