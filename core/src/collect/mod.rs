//! Readers of the job's cgroup (v1, v2) and of /proc, each taking a root path.
