"""Bad input of ``ingest``: formats, files that are not timm benchmark tables, stores that cannot be written."""

from bad_inputs import Case

TABLE = "{timm_table}"
CASES = [
    Case("ingest", 2, "required"),
    Case("ingest timm-benchmark", 2, "required"),
    Case("ingest timm-benchmrk {timm_table} --db pub.sqlite", 2, "did you mean timm-benchmark"),
    Case("ingest timm-benchmark {timm_table} --db pub.sqlite --jobs 0", 2, "--jobs must be"),
    Case("ingest csv {timm_table} --db pub.sqlite", 2, "invalid choice"),
    Case("ingest timm-benchmark {missing} --db pub.sqlite", 2, "no such file"),
    Case("ingest timm-benchmark {folder} --db pub.sqlite", 2, "folder"),
    Case("ingest timm-benchmark {empty_csv} --db pub.sqlite", 2, "not named like a timm inference benchmark table"),
    Case("ingest timm-benchmark {text} --db pub.sqlite", 2, "not named like"),
    Case("ingest timm-benchmark {timm_empty} --db pub.sqlite", 2, "is empty"),
    Case("ingest timm-benchmark {timm_binary} --db pub.sqlite", 2, "not a text file"),
    Case("ingest timm-benchmark {timm_foreign} --db pub.sqlite", 2, "lacks the columns"),
    Case("ingest timm-benchmark {timm_header_only} --db pub.sqlite", 2, "without rows"),
    Case("ingest timm-benchmark {timm_bad_number} --db pub.sqlite", 2, "row 2: infer_samples_per_sec must be a number"),
    Case("ingest timm-benchmark {timm_unknown_gpu} --db pub.sqlite", 2, "unknown GPU 'quantum9000'"),
    Case("ingest timm-benchmark {timm_cpu} --db pub.sqlite", 2, "is a CPU's table"),
    Case("ingest timm-benchmark {timm_table} {timm_table} --db pub.sqlite", 2, "given twice"),
    Case("ingest timm-benchmark {timm_table} --db {foreign}", 2, "another application"),
    Case("ingest timm-benchmark {timm_table} --db {text}", 2, "not a SQLite database"),
    Case("ingest timm-benchmark {timm_table} --db {folder}", 2, "folder"),
    Case("ingest timm-benchmark {timm_table} --db ''", 2, "empty path"),
    Case("ingest timm-benchmark {timm_table} --db {unreadable}", 2, "permission denied", unprivileged=True),
    Case("ingest timm-benchmark {timm_table} --db {rodir}/pub.sqlite", 2, "permission denied", unprivileged=True),
    Case("ingest timm-benchmark {unreadable_timm_table} --db pub.sqlite", 2, "permission denied", unprivileged=True),
]
