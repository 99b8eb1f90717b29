CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE steps (
    id              INTEGER PRIMARY KEY,   -- series number of the step's samples (job = 0)
    step            TEXT NOT NULL UNIQUE,  -- 'batch', 'extern', '0', '1', ...
    started_unix_ms INTEGER,
    ended_unix_ms   INTEGER,
    tasks           INTEGER,
    exit_status     INTEGER
);
CREATE TABLE samples_packed (
    t_ms   INTEGER NOT NULL,  -- ms since meta.started_unix_ms
    series INTEGER NOT NULL,  -- 0 = the job, else steps.id
    kind   INTEGER NOT NULL,  -- 0 periodic, 1 start, 2 end
    cpu_usage_usec INTEGER,
    cpu_user_usec INTEGER,
    cpu_system_usec INTEGER,
    memory_usage_kib INTEGER,
    memory_cache_kib INTEGER,
    memory_working_set_kib INTEGER,
    memory_lifetime_peak_kib INTEGER,
    memory_limit_kib INTEGER,
    memory_oom_kills INTEGER,
    memory_limit_hits INTEGER,
    memory_major_faults INTEGER,
    io_read_bytes INTEGER,
    io_write_bytes INTEGER,
    processes INTEGER,
    threads INTEGER,
    pressure_cpu_some_avg10_centipercent INTEGER,
    pressure_memory_some_avg10_centipercent INTEGER,
    pressure_memory_full_avg10_centipercent INTEGER,
    pressure_io_some_avg10_centipercent INTEGER,
    pressure_io_full_avg10_centipercent INTEGER,
    cores_allocated INTEGER,
    memory_working_set_max_kib INTEGER,
    effective_cores_max_millicores INTEGER,
    sampler_cpu_usec INTEGER,
    sampler_bytes_written INTEGER
);
CREATE TABLE events (
    t_unix_ms INTEGER NOT NULL,
    step      TEXT,
    kind      TEXT NOT NULL,
    detail    TEXT NOT NULL
);
CREATE VIEW samples AS SELECT
    (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'started_unix_ms') + t_ms AS t_unix_ms,
    CASE series WHEN 0 THEN 'job' ELSE (SELECT step FROM steps WHERE id = series) END AS series,
    CASE kind WHEN 0 THEN 'periodic' WHEN 1 THEN 'start' WHEN 2 THEN 'end' END AS kind,
    CASE WHEN cpu_usage_usec IS NULL THEN NULL ELSE SUM(cpu_usage_usec) OVER w END AS cpu_usage_usec,
    CASE WHEN cpu_user_usec IS NULL THEN NULL ELSE SUM(cpu_user_usec) OVER w END AS cpu_user_usec,
    CASE WHEN cpu_system_usec IS NULL THEN NULL ELSE SUM(cpu_system_usec) OVER w END AS cpu_system_usec,
    CASE WHEN memory_usage_kib IS NULL THEN NULL ELSE 1024 * SUM(memory_usage_kib) OVER w END AS memory_usage_bytes,
    CASE WHEN memory_cache_kib IS NULL THEN NULL ELSE 1024 * SUM(memory_cache_kib) OVER w END AS memory_cache_bytes,
    CASE WHEN memory_working_set_kib IS NULL THEN NULL ELSE 1024 * SUM(memory_working_set_kib) OVER w END AS memory_working_set_bytes,
    CASE WHEN memory_lifetime_peak_kib IS NULL THEN NULL ELSE 1024 * SUM(memory_lifetime_peak_kib) OVER w END AS memory_lifetime_peak_bytes,
    CASE WHEN memory_limit_kib IS NULL THEN NULL ELSE 1024 * SUM(memory_limit_kib) OVER w END AS memory_limit_bytes,
    CASE WHEN memory_oom_kills IS NULL THEN NULL ELSE SUM(memory_oom_kills) OVER w END AS memory_oom_kills,
    CASE WHEN memory_limit_hits IS NULL THEN NULL ELSE SUM(memory_limit_hits) OVER w END AS memory_limit_hits,
    CASE WHEN memory_major_faults IS NULL THEN NULL ELSE SUM(memory_major_faults) OVER w END AS memory_major_faults,
    CASE WHEN io_read_bytes IS NULL THEN NULL ELSE SUM(io_read_bytes) OVER w END AS io_read_bytes,
    CASE WHEN io_write_bytes IS NULL THEN NULL ELSE SUM(io_write_bytes) OVER w END AS io_write_bytes,
    CASE WHEN processes IS NULL THEN NULL ELSE SUM(processes) OVER w END AS processes,
    CASE WHEN threads IS NULL THEN NULL ELSE SUM(threads) OVER w END AS threads,
    CASE WHEN pressure_cpu_some_avg10_centipercent IS NULL THEN NULL ELSE SUM(pressure_cpu_some_avg10_centipercent) OVER w / 100.0 END AS pressure_cpu_some_avg10_percent,
    CASE WHEN pressure_memory_some_avg10_centipercent IS NULL THEN NULL ELSE SUM(pressure_memory_some_avg10_centipercent) OVER w / 100.0 END AS pressure_memory_some_avg10_percent,
    CASE WHEN pressure_memory_full_avg10_centipercent IS NULL THEN NULL ELSE SUM(pressure_memory_full_avg10_centipercent) OVER w / 100.0 END AS pressure_memory_full_avg10_percent,
    CASE WHEN pressure_io_some_avg10_centipercent IS NULL THEN NULL ELSE SUM(pressure_io_some_avg10_centipercent) OVER w / 100.0 END AS pressure_io_some_avg10_percent,
    CASE WHEN pressure_io_full_avg10_centipercent IS NULL THEN NULL ELSE SUM(pressure_io_full_avg10_centipercent) OVER w / 100.0 END AS pressure_io_full_avg10_percent,
    CASE WHEN cores_allocated IS NULL THEN NULL ELSE SUM(cores_allocated) OVER w END AS cores_allocated,
    CASE WHEN memory_working_set_max_kib IS NULL THEN NULL ELSE 1024 * SUM(memory_working_set_max_kib) OVER w END AS memory_working_set_max_bytes,
    CASE WHEN effective_cores_max_millicores IS NULL THEN NULL ELSE SUM(effective_cores_max_millicores) OVER w / 1000.0 END AS effective_cores_max,
    CASE WHEN sampler_cpu_usec IS NULL THEN NULL ELSE SUM(sampler_cpu_usec) OVER w END AS sampler_cpu_usec,
    CASE WHEN sampler_bytes_written IS NULL THEN NULL ELSE SUM(sampler_bytes_written) OVER w END AS sampler_bytes_written
FROM samples_packed
WINDOW w AS (PARTITION BY series ORDER BY rowid ROWS UNBOUNDED PRECEDING);
CREATE TABLE gpus (
    id                 INTEGER PRIMARY KEY,  -- gpu_samples.gpu
    uuid               TEXT NOT NULL UNIQUE, -- the key: NVML's GPU-… id
    label              TEXT NOT NULL,        -- cuda:N as the job's code sees it (else nvml:N)
    cuda_index         INTEGER,              -- position in the job's CUDA_VISIBLE_DEVICES
    nvml_index         INTEGER NOT NULL,     -- nvidia-smi's index on the node
    pci_bus_id         TEXT,
    name               TEXT,
    memory_total_bytes INTEGER,
    power_limit_watts  REAL,                 -- enforced limit when recording started
    sm_clock_max_mhz   INTEGER,
    nvlink_links       INTEGER,              -- active NVLink links (0: PCIe only)
    step               TEXT NOT NULL,        -- the step that records the card
    first_unix_ms      INTEGER NOT NULL
);
CREATE TABLE gpu_links (
    a            INTEGER NOT NULL,  -- gpus.id
    b            INTEGER NOT NULL,
    level        TEXT NOT NULL,     -- nvlink, or the PCIe common ancestor
    nvlink_links INTEGER NOT NULL,
    PRIMARY KEY (a, b)
);
CREATE TABLE gpu_samples (
    t_ms                       INTEGER NOT NULL,  -- ms since the card's previous row
    gpu                        INTEGER NOT NULL,  -- gpus.id
    utilization_percent        INTEGER,
    memory_utilization_percent INTEGER,
    memory_used_mib            INTEGER,  -- anyone's, MiB
    power_draw_milliwatts      INTEGER,
    power_limit_milliwatts     INTEGER,
    temperature_celsius        INTEGER,
    sm_clock_mhz               INTEGER,
    throttle_reasons           INTEGER,  -- nvmlClocksThrottleReasons bits
    energy_millijoules         INTEGER,  -- cumulative since the driver loaded
    job_processes              INTEGER,
    job_memory_mib             INTEGER,
    other_processes            INTEGER,  -- not the job's: never credited to it
    other_memory_mib           INTEGER,
    ecc_uncorrected            INTEGER,  -- volatile count
    nvlink_tx_kib              INTEGER,  -- cumulative, all links
    nvlink_rx_kib              INTEGER,
    pcie_tx_kib_per_s          INTEGER,  -- NVML's 20 ms window, card -> host
    pcie_rx_kib_per_s          INTEGER,  -- host -> card
    xid_events                 INTEGER,  -- critical Xid events since the previous row (gpu_xid)
    errors                     INTEGER NOT NULL   -- 4 bits per reading, see store/gpu.rs
);
CREATE TABLE gpu_xid (
    t_unix_ms INTEGER NOT NULL,
    gpu       INTEGER NOT NULL,  -- gpus.id
    xid       INTEGER NOT NULL   -- the Xid code (NVIDIA's Xid catalogue)
);
CREATE VIEW gpu_readings AS SELECT
    (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'started_unix_ms') + d.t_ms AS t_unix_ms,
    g.label AS gpu, g.uuid AS uuid,
    d.utilization_percent AS utilization_percent, d.memory_utilization_percent AS memory_utilization_percent, 1048576 * d.memory_used_mib AS memory_used_bytes, g.memory_total_bytes AS memory_total_bytes,
    d.power_draw_milliwatts / 1000.0 AS power_draw_watts, d.power_limit_milliwatts / 1000.0 AS power_limit_watts,
    d.temperature_celsius AS temperature_celsius, d.sm_clock_mhz AS sm_clock_mhz, g.sm_clock_max_mhz AS sm_clock_max_mhz,
    d.throttle_reasons AS throttle_reasons, d.energy_millijoules / 1000.0 AS energy_joules, d.job_processes AS job_processes, 1048576 * d.job_memory_mib AS job_memory_bytes, d.other_processes AS other_processes, 1048576 * d.other_memory_mib AS other_memory_bytes, d.ecc_uncorrected AS ecc_uncorrected, 1024 * d.nvlink_tx_kib AS nvlink_tx_bytes, 1024 * d.nvlink_rx_kib AS nvlink_rx_bytes,
    1024 * d.pcie_tx_kib_per_s AS pcie_tx_bytes_per_second, 1024 * d.pcie_rx_kib_per_s AS pcie_rx_bytes_per_second, d.xid_events AS xid_events,
    CASE WHEN d.xid_events > 0 THEN (SELECT group_concat(x.xid, ',') FROM gpu_xid x
        WHERE x.gpu = d.gpu AND x.t_unix_ms = (SELECT CAST(value AS INTEGER) FROM meta
        WHERE key = 'started_unix_ms') + d.t_ms) END AS xid_codes,
    CASE (d.errors >> 0) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS utilization_error,
    CASE (d.errors >> 4) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS memory_utilization_error,
    CASE (d.errors >> 8) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS memory_used_error,
    CASE (d.errors >> 12) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS power_draw_error,
    CASE (d.errors >> 16) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS power_limit_error,
    CASE (d.errors >> 20) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS temperature_error,
    CASE (d.errors >> 24) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS sm_clock_error,
    CASE (d.errors >> 28) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS throttle_reasons_error,
    CASE (d.errors >> 32) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS energy_error,
    CASE (d.errors >> 36) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS processes_error,
    CASE (d.errors >> 40) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS ecc_uncorrected_error,
    CASE (d.errors >> 44) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS nvlink_error,
    CASE (d.errors >> 48) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS pcie_tx_error,
    CASE (d.errors >> 52) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS pcie_rx_error,
    CASE (d.errors >> 56) & 15 WHEN 1 THEN 'NOT_SUPPORTED' WHEN 2 THEN 'NO_PERMISSION' WHEN 3 THEN 'GPU_IS_LOST' WHEN 4 THEN 'UNKNOWN' WHEN 5 THEN 'TIMEOUT' WHEN 6 THEN 'NO_DATA' WHEN 7 THEN 'INVALID_ARGUMENT' WHEN 8 THEN 'UNINITIALIZED' WHEN 9 THEN 'FUNCTION_NOT_FOUND' WHEN 10 THEN 'INSUFFICIENT_SIZE' WHEN 11 THEN 'DRIVER_NOT_LOADED' WHEN 12 THEN 'RESET_REQUIRED' WHEN 13 THEN 'NOT_FOUND' WHEN 14 THEN 'IN_USE' WHEN 15 THEN 'OTHER' END AS xid_error
FROM (SELECT rowid AS r, gpu, errors, SUM(t_ms) OVER w AS t_ms,
        CASE WHEN utilization_percent IS NULL THEN NULL ELSE SUM(utilization_percent) OVER w END AS utilization_percent,
        CASE WHEN memory_utilization_percent IS NULL THEN NULL ELSE SUM(memory_utilization_percent) OVER w END AS memory_utilization_percent,
        CASE WHEN memory_used_mib IS NULL THEN NULL ELSE SUM(memory_used_mib) OVER w END AS memory_used_mib,
        CASE WHEN power_draw_milliwatts IS NULL THEN NULL ELSE SUM(power_draw_milliwatts) OVER w END AS power_draw_milliwatts,
        CASE WHEN power_limit_milliwatts IS NULL THEN NULL ELSE SUM(power_limit_milliwatts) OVER w END AS power_limit_milliwatts,
        CASE WHEN temperature_celsius IS NULL THEN NULL ELSE SUM(temperature_celsius) OVER w END AS temperature_celsius,
        CASE WHEN sm_clock_mhz IS NULL THEN NULL ELSE SUM(sm_clock_mhz) OVER w END AS sm_clock_mhz,
        CASE WHEN throttle_reasons IS NULL THEN NULL ELSE SUM(throttle_reasons) OVER w END AS throttle_reasons,
        CASE WHEN energy_millijoules IS NULL THEN NULL ELSE SUM(energy_millijoules) OVER w END AS energy_millijoules,
        CASE WHEN job_processes IS NULL THEN NULL ELSE SUM(job_processes) OVER w END AS job_processes,
        CASE WHEN job_memory_mib IS NULL THEN NULL ELSE SUM(job_memory_mib) OVER w END AS job_memory_mib,
        CASE WHEN other_processes IS NULL THEN NULL ELSE SUM(other_processes) OVER w END AS other_processes,
        CASE WHEN other_memory_mib IS NULL THEN NULL ELSE SUM(other_memory_mib) OVER w END AS other_memory_mib,
        CASE WHEN ecc_uncorrected IS NULL THEN NULL ELSE SUM(ecc_uncorrected) OVER w END AS ecc_uncorrected,
        CASE WHEN nvlink_tx_kib IS NULL THEN NULL ELSE SUM(nvlink_tx_kib) OVER w END AS nvlink_tx_kib,
        CASE WHEN nvlink_rx_kib IS NULL THEN NULL ELSE SUM(nvlink_rx_kib) OVER w END AS nvlink_rx_kib,
        CASE WHEN pcie_tx_kib_per_s IS NULL THEN NULL ELSE SUM(pcie_tx_kib_per_s) OVER w END AS pcie_tx_kib_per_s,
        CASE WHEN pcie_rx_kib_per_s IS NULL THEN NULL ELSE SUM(pcie_rx_kib_per_s) OVER w END AS pcie_rx_kib_per_s,
        CASE WHEN xid_events IS NULL THEN NULL ELSE SUM(xid_events) OVER w END AS xid_events
      FROM gpu_samples
      WINDOW w AS (PARTITION BY gpu ORDER BY rowid ROWS UNBOUNDED PRECEDING)) d
JOIN gpus g ON g.id = d.gpu
ORDER BY d.gpu, d.r;
