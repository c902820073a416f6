"""Bad input of the commands that measure a grid (``survey``, ``nas measure``, ``nas table``): where the work runs
(Ray addresses, GPU types, executors) and the grid's options. Each fails before a store is opened or Ray started."""

from bad_inputs import Case

SURVEY = "survey --device cpu --models {factory}:make --db grid.sqlite"
RAY = f"{SURVEY} --executor ray"
MALFORMED = [
    "garbage",
    "6379",
    ":6379",
    "host:",
    "host:0",
    "host:70000",
    "1.2.3:80",
    "999.1.1.1:80",
    "'a b:80'",
    "http://host:80",
    "[zz]:80",
    "host:port",
    "host:-1",
    "''",
    "host:6379:1",
    "[::1]",
]

CASES = [
    *(Case(f"{RAY} --ray-address {address}", 2, "--ray-address must be HOST:PORT") for address in MALFORMED),
    *(
        Case(f"{RAY} --dry-run --ray-address {address}", 2, "--ray-address must be HOST:PORT")
        for address in MALFORMED[:4]
    ),
    Case(f"{RAY} --ray-address ray://10.0.0.1:10001", 2, "Ray Client (ray://) addresses are not supported"),
    Case(f"{RAY} --dry-run --ray-address ray://head:10001", 2, "not supported"),
    Case(f"{RAY} --ray-address 127.0.0.1:1", 2, "no Ray cluster answers at 127.0.0.1:1: connection refused"),
    Case(f"{RAY} --dry-run --ray-address 127.0.0.1:1", 2, "connection refused"),
    Case(f"{RAY} --ray-address localhost:1", 2, "no Ray cluster answers at localhost:1"),
    Case(f"{RAY} --ray-address no-such-host.invalid:6379", 2, "unknown host 'no-such-host.invalid'"),
    Case(f"{SURVEY} --ray-address 127.0.0.1:6379", 2, "--ray-address and --gpu-types apply to --executor ray"),
    Case(f"{SURVEY} --executor local --ray-address auto", 2, "apply to --executor ray"),
    Case(f"{SURVEY} --gpu-types all", 2, "apply to --executor ray"),
    Case(f"{RAY} --gpu-types all", 2, "--gpu-types chooses GPU types: it does not apply to --device cpu"),
    Case(f"{RAY} --gpu-types A100,H100 --dry-run", 2, "does not apply to --device cpu"),
    Case(f"{SURVEY} --executor dask", 2, "executor"),
    Case(f"{SURVEY} --executor ''", 2, "executor"),
    Case(f"{SURVEY} --shard 0/3", 2, "a shard is K/N"),
    Case(f"{SURVEY} --shard 4/3", 2, "a shard is K/N"),
    Case(f"{SURVEY} --shard 1/0", 2, "a shard is K/N"),
    Case(f"{SURVEY} --shard half", 2, "a shard is K/N"),
    Case(f"{SURVEY} --shard -1/2", 2, "a shard is K/N"),
    Case(f"{SURVEY} --shard 1/2/3", 2, "a shard is K/N"),
    Case(f"{SURVEY} --jobs 0", 2, "--jobs"),
    Case(f"{SURVEY} --per-worker 0", 2, "--per-worker"),
    Case(f"{SURVEY} --per-worker -3", 2, "--per-worker"),
    Case(f"{SURVEY} --timeout 0", 2, "--timeout"),
    Case(f"{SURVEY} --timeout -5", 2, "--timeout"),
    Case(f"{SURVEY} --timeout nan", 2, "--timeout"),
    Case(f"{SURVEY} --backend warp", 2, "warp"),
    Case(f"{SURVEY} --backend graph,,eager", 2, "without empty elements"),
    Case(f"{SURVEY} --precision fp8", 2, "fp8"),
    Case(f"{SURVEY} --precision fp32,", 2, "without empty elements"),
    Case(f"{SURVEY} --batch 1,,8", 2, "without empty elements"),
    Case(f"{SURVEY} --batch eight", 2, "batch sizes must be comma-separated integers"),
    Case(f"{SURVEY} --attribute some", 2, "attribute"),
    Case(f"{SURVEY} --fit-batch --shard 2", 2, "a shard is K/N"),
    Case(f"{SURVEY} --fit-batch double", 2, "invalid choice 'double'; use one of: halve, timm"),
    Case("survey --device cpu --db grid.sqlite --models-file {missing}", 2, "list of models"),
    Case("survey --device cpu --db grid.sqlite --models-file {empty_csv}", 2, "empty"),
    Case("survey --device cpu --db grid.sqlite --models-file {binary}", 2, ""),
    Case(f"{SURVEY} --models {{factory}}:make@4", 2, "resolution must be between 8 and 4096 pixels, got 4"),
    Case("survey --device cpu --db grid.sqlite --models 'torchvision:nosuchnet@64'", 2, "nosuchnet"),
    Case("survey --device cpu --db grid.sqlite --family nosuchfamily", 2, "nosuchfamily"),
    Case("survey --device cpu --db grid.sqlite --set nosuchset", 2, "nosuchset"),
    Case("survey --device cpu --db grid.sqlite --models 'torchvision:nosuchnet*'", 2, "nosuchnet"),
    Case("survey --device quantum --db grid.sqlite --models {factory}:make", 2, "quantum"),
    Case("nas measure {missing} --executor ray --ray-address garbage --device cpu", 2, ""),
    Case(
        "nas table --space regnet --out t.json --executor ray --ray-address garbage --device cpu",
        2,
        "--ray-address must be HOST:PORT",
    ),
    Case(
        "nas table --space regnet --out t.json --executor ray --gpu-types all --device cpu",
        2,
        "does not apply to --device cpu",
    ),
    Case("nas table --space regnet --out t.json --ray-address 127.0.0.1:1 --device cpu", 2, "apply to --executor ray"),
]
