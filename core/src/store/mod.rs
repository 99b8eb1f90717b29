//! The per-job SQLite file: schema, writer, reader.
