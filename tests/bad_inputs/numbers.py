"""Bad numbers, over every verb and flag that takes one: seeds outside 0..2**32-1, counts of zero, below zero or
beyond what can run (the line says the bound and why), NaN, infinities, zero and negative seconds, throughputs and
peaks, batch sizes and batch lists, resolutions below 8 px or above 4096. Each is refused before a model is built, a
file written or a store opened (the sandbox check)."""

from bad_inputs import Case

M = "{factory}:make"  # a tiny factory model (16 px)
SURVEY = f"survey --models {M} --device cpu --dry-run --db numbers.sqlite"  # never created
SEARCH = "nas search --space mbv3 --min-throughput 1 --simulate {store}"
SEED = "--seed must be a whole number from 0 to 4294967295 (2**32 - 1)"
BATCH = "batch size must be an integer between 1 and 65536"
RESOLUTION = "resolution must be between 8 and 4096 pixels"
ARCHITECTURES = "at least 1 and at most 100000 (sampling more takes minutes"


def _each(templates: list[str], values: list[tuple[str, str]]) -> list[Case]:
    """Every template (``@`` marks the value) with every (value, phrase)."""
    return [Case(template.replace("@", value), 2, phrase) for template in templates for value, phrase in values]


# --- seeds: one rule everywhere ---------------------------------------------------------------------------------

SEEDS = _each(
    [
        "nas sample --space mbv3 -n 2 --out s.jsonl --seed @",
        "nas fit --space mbv3 --db {store} --table {table} --out f.json --seed @",
        f"{SEARCH} --seed @",
        "calibrate --out p.json --device cpu --seed @",
    ],
    [("-1", SEED), ("4294967296", SEED), ("99999999999999999999999", SEED), ("-inf", "invalid int value")],
)

# --- counts: at least 1 (or 0), at most what can run ------------------------------------------------------------

COUNTS = [
    Case("nas sample --space mbv3 --out s.jsonl -n 0", 2, f"-n must be {ARCHITECTURES}"),
    Case("nas sample --space mbv3 --out s.jsonl -n -1", 2, f"-n must be {ARCHITECTURES}"),
    Case("nas sample --space regnet --out s.jsonl -n 100001", 2, "got 100001"),
    Case("nas sample --space mbv3 --out s.jsonl -n 1000000000", 2, f"-n must be {ARCHITECTURES}"),
    Case("nas search --space mbv3 --min-throughput 1 --device cpu --pool-size 0", 2, "--pool-size must be at least 1"),
    Case("nas search --space mbv3 --min-throughput 1 --device cpu --pool-size 1000000000", 2, ARCHITECTURES),
    Case(
        "nas fit --space mbv3 --db {store} --table {table} --out f.json --prior-archs -1", 2, "at least 0 and at most"
    ),
    Case("nas fit --space mbv3 --db {store} --table {table} --out f.json --prior-archs 1000000000", 2, "100000"),
    Case("calibrate --out p.json --count 0", 2, "--count must be at least 1 and at most 15000"),
    Case("calibrate --out p.json --count -5", 2, "--count must be at least 1"),
    Case("calibrate --out p.json --count 15001", 2, "315 distinct configurations"),
    Case("calibrate --out p.json --count 100000000000", 2, "a larger sample cannot be drawn"),
    Case(f"{SEARCH} --budget 0", 2, "--budget must be at least 1"),
    Case(f"{SEARCH} --budget -3", 2, "--budget must be at least 1"),
    Case(f"{SEARCH} --budget 100000000000", 2, "--budget must be at least 1 and at most 100000"),
    Case("nas measure {archs} --device cpu --dry-run --db numbers.sqlite --limit 0", 2, "--limit must be at least 1"),
    Case("nas measure {archs} --device cpu --dry-run --db numbers.sqlite --limit -1", 2, "--limit must be at least 1"),
    Case(f"count {M} --top 0", 2, "--top must be at least 1, got 0"),
    Case(f"count {M} --top -3", 2, "--top must be at least 1, got -3"),
    Case(f"layers {M} --device cpu --top 0", 2, "--top must be at least 1"),
    Case(f"layers {M} --device cpu --top -1", 2, "--top must be at least 1"),
    Case(f"{SURVEY} --jobs 0", 2, "--jobs must be at least 1"),
    Case(f"{SURVEY} --jobs -2", 2, "--jobs must be at least 1"),
    Case(f"{SURVEY} --jobs 1000000", 2, "this machine's cores"),
    Case(f"{SURVEY} --per-worker 0", 2, "--per-worker must be at least 1, got 0"),
    Case(f"{SURVEY} --per-worker -4", 2, "--per-worker must be at least 1"),
    Case(f"{SURVEY} --cudnn-benchmark-limit -1", 2, "--cudnn-benchmark-limit must be 0"),
    Case(f"profile {M} --device cpu --cudnn-benchmark-limit -2", 2, "--cudnn-benchmark-limit must be 0"),
    Case(f"advise {M} --device cpu --multiple 0", 2, "the channel multiple (--multiple) must be at least 1"),
    Case(f"advise {M} --device cpu --multiple -8", 2, "--multiple) must be at least 1"),
    Case(f"advise {M} --device cpu --multiple 129", 2, "at most 128 (tensor cores want 8 or 16"),
    Case(f"advise {M} --device cpu --multiple 100000", 2, "at most 128"),
    Case("nas search --space mbv3 --min-throughput 1 --device cpu --pool-size -5", 2, "--pool-size must be"),
]

# --- seconds, milliseconds, throughputs, peaks, FLOPs: positive and finite --------------------------------------

SECONDS = _each(
    [f"{SURVEY} --timeout @"],
    [
        ("inf", "--timeout must be positive and at most 604800 seconds (a week)"),
        ("-inf", "at most 604800"),
        ("1e9", "got 1000000000.0"),
        ("-0", "--timeout must be positive"),
    ],
)
TIMED_MS = _each(
    [f"{SURVEY} --min-time-ms @", "nas measure {archs} --device cpu --dry-run --db numbers.sqlite --min-time-ms @"],
    [
        ("0", "--min-time-ms must be positive"),
        ("-1", "--min-time-ms must be positive"),
        ("nan", "got nan"),
        ("inf", "got inf"),
        ("1e15", "at most 60000 ms (a minute of timing per cell)"),
    ],
)
PEAKS = _each(
    [f"profile {M} --device cpu --peak @", f"layers {M} --device cpu --peak @", f"{SURVEY} --peak @"],
    [
        ("0", "--peak must be a positive, finite number"),
        ("-1", "--peak must be"),
        ("nan", "got nan"),
        ("inf", "got inf"),
        ("-inf", "got -inf"),
    ],
)
THROUGHPUTS = _each(
    ["nas search --space mbv3 --min-throughput @ --simulate {store}"],
    [
        ("0", "--min-throughput must be positive and finite (samples/s), got 0"),
        ("-1", "got -1.0"),
        ("nan", "got nan"),
        ("inf", "got inf"),
        ("-inf", "got -inf"),
    ],
)
FLOPS = [
    Case("nas sample --space mbv3 -n 2 --out s.jsonl --flops-min -1", 2, "--flops-min must be a finite number"),
    Case("nas sample --space mbv3 -n 2 --out s.jsonl --flops-min nan", 2, "--flops-min must be a finite number"),
    Case("nas sample --space mbv3 -n 2 --out s.jsonl --flops-max inf", 2, "--flops-max must be a finite number"),
    Case("nas sample --space mbv3 -n 2 --out s.jsonl --flops-max -inf", 2, "--flops-max must be a finite number"),
    Case("nas sample --space mbv3 -n 2 --out s.jsonl --flops-min 3e8 --flops-max 2e8", 2, "no architecture fits"),
]

# --- batch sizes and batch lists --------------------------------------------------------------------------------

BATCH_VALUES = [("0", BATCH), ("-3", BATCH), ("65537", BATCH), ("1000000000", BATCH)]
BATCHES = _each(
    [
        f"count {M} --batch @",
        f"layers {M} --device cpu --batch @",
        "nas predict {archs} --gpu h200 --batch @",
        f"{SEARCH} --batch @",
    ],
    BATCH_VALUES,
) + _each(
    [
        f"profile {M} --device cpu --batch @",
        f"predict {M} --gpu h200 --batch @",
        f"advise {M} --device cpu --batch @",
        f"advise {M} --device cpu --ladder @",
        f"{SURVEY} --batch @",
    ],
    [
        *BATCH_VALUES,
        ("1,,2", "without empty elements"),
        ("8,", "without empty elements"),
        ("1,x", "comma-separated integers"),
        ("nan", "comma-separated integers"),
    ],
)

# --- resolutions: 8 px at least, 4096 at most -------------------------------------------------------------------

RESOLUTIONS = _each(
    [
        f"count {M} --res @",
        f"profile {M} --device cpu --res @",
        f"layers {M} --device cpu --res @",
        f"predict {M} --gpu h200 --res @",
        f"advise {M} --device cpu --res @",
        f"{SURVEY} --res @",
    ],
    [("0", RESOLUTION), ("1", RESOLUTION), ("7", RESOLUTION), ("-5", RESOLUTION), ("4097", RESOLUTION)],
)
MODEL_TOO_SMALL = [Case("count torchvision:squeezenet1_0 --res 8", 2, "Output size is too small")]

CASES = SEEDS + COUNTS + SECONDS + TIMED_MS + PEAKS + THROUGHPUTS + FLOPS + BATCHES + RESOLUTIONS + MODEL_TOO_SMALL
