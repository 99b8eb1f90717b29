//! Strict parsing of the `--slurmwatch[=SECONDS]` value and the plugstack arguments.
