"""Bad command lines, over every verb and flag: misspelt and abbreviated verbs, sub-verbs and flags (a guess, never
an abbreviation taken), missing arguments and values (one line naming the verb's help, no usage block), stray
arguments, choices, types, empty strings where a value is needed, wrong model specs and globs given to a verb of
one model. Every case fails before a model is built, a file read or a store opened."""

from bad_inputs import Case

HELP = "(see: utilscope "  # every parser error points to the verb's --help
ABBREVIATED = "(options are never abbreviated)"
REQUIRED = "the following arguments are required"
EXPECTED = "expected one argument"
NO_GLOB = "takes one model and"
EMPTY_LIST = "is empty: give at least one value"

M = "{factory}:make"  # a tiny factory model: nothing below reaches building it
DB = "--db cli.sqlite"  # never created: every case fails before the store is opened


def _cases(rows: list[tuple]) -> list[Case]:
    return [Case(argv, 2, phrase) for argv, phrase in rows]


# --- verbs and sub-verbs: misspelt, abbreviated, missing, empty -------------------------------------------------

VERBS = [
    ("profil", "did you mean profile?"),
    ("prof", "did you mean profile?"),
    ("PROFILE", "did you mean profile?"),
    ("cout torchvision:resnet18", "did you mean count?"),
    ("conut torchvision:resnet18", "did you mean count?"),
    ("modles", "did you mean models?"),
    ("devics", "did you mean devices?"),
    ("ceiling", "did you mean ceilings?"),
    ("survy --dry-run", "did you mean survey?"),
    ("reprot {store}", "did you mean report?"),
    ("exprot {store} out.csv", "did you mean export?"),
    ("merg {store} -o m.sqlite", "did you mean merge?"),
    ("calibrat --out p.json", "did you mean calibrate?"),
    ("predic torchvision:resnet18", "did you mean predict?"),
    ("advice torchvision:resnet18", "did you mean advise?"),
    ("layer torchvision:resnet18", "did you mean layers?"),
    ("caches", "did you mean cache?"),
    ("nsa sample", "did you mean nas?"),
    ("xyzzy", "use one of: count, models, profile"),
    ("''", "unknown command ''"),
    ("nas sampel --space mbv3", "did you mean sample?"),
    ("nas mesure {archs}", "did you mean measure?"),
    ("nas tabel --space mbv3", "did you mean table?"),
    ("nas fitt --space mbv3", "did you mean fit?"),
    ("nas predic {archs}", "did you mean predict?"),
    ("nas analyse {store}", "did you mean analyze?"),
    ("nas serach --space mbv3", "did you mean search?"),
    ("nas samp", "did you mean sample?"),
    ("nas ''", "unknown nas command ''"),
    ("nas", f"{REQUIRED}: VERB (see: utilscope nas --help)"),
    ("", f"{REQUIRED}: COMMAND (see: utilscope --help)"),
    ("--verison", "did you mean --version?"),
    ("--bogus count torchvision:resnet18", "unknown option --bogus"),
    ("nas --bogus sample", "unknown option --bogus (see: utilscope nas --help)"),
]

# --- a verb without its required arguments ----------------------------------------------------------------------

MISSING_ARGUMENTS = [
    ("count", f"{REQUIRED}: model (see: utilscope count --help)"),
    ("profile", f"{REQUIRED}: model (see: utilscope profile --help)"),
    ("layers", f"{REQUIRED}: model (see: utilscope layers --help)"),
    ("predict", f"{REQUIRED}: model (see: utilscope predict --help)"),
    ("advise", f"{REQUIRED}: model (see: utilscope advise --help)"),
    ("report", f"{REQUIRED}: db (see: utilscope report --help)"),
    ("export", f"{REQUIRED}: db, out"),
    ("export {store}", f"{REQUIRED}: out"),
    ("merge", f"{REQUIRED}: STORE, -o/--out"),
    ("merge {store}", f"{REQUIRED}: -o/--out"),
    ("calibrate", f"{REQUIRED}: --out (see: utilscope calibrate --help)"),
    ("nas sample", f"{REQUIRED}: --space (see: utilscope nas sample --help)"),
    ("nas measure", f"{REQUIRED}: archs"),
    ("nas table --space mbv3", f"{REQUIRED}: --out"),
    ("nas table --out t.json", f"{REQUIRED}: --space"),
    ("nas fit --space mbv3", f"{REQUIRED}: --db, --table, --out"),
    ("nas fit --db {store} --table {table} --out f.json", f"{REQUIRED}: --space"),
    ("nas predict", f"{REQUIRED}: archs"),
    ("nas analyze", f"{REQUIRED}: db"),
    ("nas search --space mbv3", f"{REQUIRED}: --min-throughput"),
    ("nas search --min-throughput 1", f"{REQUIRED}: --space"),
]

# --- an option without its value --------------------------------------------------------------------------------

MISSING_VALUES = [
    (f"count {M} --batch", f"argument --batch: {EXPECTED}"),
    (f"count {M} --res", f"argument --res: {EXPECTED}"),
    (f"count {M} --dtype", f"argument --dtype: {EXPECTED}"),
    (f"count {M} --top", f"argument --top: {EXPECTED}"),
    (f"profile {M} --precision", f"argument --precision: {EXPECTED}"),
    (f"profile {M} --backend", f"argument --backend: {EXPECTED}"),
    (f"profile {M} --device", f"argument --device: {EXPECTED}"),
    (f"profile {M} --peak", f"argument --peak: {EXPECTED}"),
    (f"layers {M} --roofline", f"argument --roofline: {EXPECTED}"),
    (f"survey --models {M} {DB} --dry-run --batch", f"argument --batch: {EXPECTED}"),
    (f"survey --models {M} --dry-run --db", f"argument --db: {EXPECTED}"),
    (f"survey --dry-run {DB} --models", f"argument --models: {EXPECTED}"),
    (f"survey --models {M} {DB} --dry-run --shard", f"argument --shard: {EXPECTED}"),
    ("merge {store} -o", f"argument -o/--out: {EXPECTED}"),
    ("report {store} -o", f"argument -o/--out: {EXPECTED}"),
    ("nas sample --space mbv3 --out s.jsonl -n", f"argument -n: {EXPECTED}"),
    ("nas sample --space mbv3 --out s.jsonl --seed", f"argument --seed: {EXPECTED}"),
    ("nas search --space mbv3 --min-throughput", f"argument --min-throughput: {EXPECTED}"),
    (f"predict {M} --gpu", f"argument --gpu: {EXPECTED}"),
    (f"advise {M} --multiple", f"argument --multiple: {EXPECTED}"),
    ("calibrate --out p.json --count", f"argument --count: {EXPECTED}"),
]

# --- misspelt flags: a guess among the verb's own flags ---------------------------------------------------------

MISSPELT_FLAGS = [
    (f"count {M} --bach 8", "unknown option --bach; did you mean --batch? (see: utilscope count --help)"),
    (f"count {M} --jsno", "did you mean --json?"),
    (f"count {M} --dtyp fp16", "did you mean --dtype?"),
    (f"count {M} --rooflin r.png", "unknown option --rooflin (see: utilscope count --help)"),
    (f"profile {M} --precison fp16", "did you mean --precision?"),
    (f"profile {M} --backedn graph", "did you mean --backend?"),
    (f"profile {M} --no-channel-last", "did you mean --no-channels-last?"),
    (f"profile {M} --cudnn-benchmark-limt 3", "did you mean --cudnn-benchmark-limit?"),
    (f"layers {M} --tpo 3", "did you mean --top?"),
    (f"survey --modles {M} {DB} --dry-run", "did you mean --models?"),
    (f"survey --models {M} {DB} --dry-rn", "did you mean --dry-run?"),
    (f"survey --models {M} {DB} --dry-run --shards 1/2", "did you mean --shard?"),
    (f"survey --models {M} {DB} --dry-run --per_worker 2", "did you mean --per-worker?"),
    ("report {store} --otu rep", "did you mean --out?"),
    ("merge {store} --ouput m.sqlite", "did you mean --out?"),
    ("nas sample --space mbv3 --sed 1 --out s.jsonl", "did you mean --seed?"),
    ("nas sample --spce mbv3 --out s.jsonl", "did you mean --space?"),
    ("nas search --space mbv3 --min-throughput 1 --budjet 5", "did you mean --budget?"),
    ("nas fit --space mbv3 --db {store} --tabel {table} --out f.json", "did you mean --table?"),
    ("calibrate --out p.json --coutn 5", "did you mean --count?"),
    (f"predict {M} --gpus h200", "did you mean --gpu?"),
    (f"advise {M} --multipel 8", "did you mean --multiple?"),
    (f"advise {M} --ladders none", "did you mean --ladder?"),
    ("cache --clar", "did you mean --clear?"),
    ("ceilings --refrsh", "did you mean --refresh?"),
    ("devices --jsn", "did you mean --json?"),
    ("models --sett timm-cnn", "did you mean --set?"),
]

# --- abbreviations: never taken, however unambiguous ------------------------------------------------------------

ABBREVIATIONS = [
    (f"count {M} --jso", f"did you mean --json? {ABBREVIATED}"),
    (f"count {M} --bat 2", f"did you mean --batch? {ABBREVIATED}"),
    (f"profile {M} --prec fp32", f"did you mean --precision? {ABBREVIATED}"),
    (f"layers {M} --rooflin r.png", f"did you mean --roofline? {ABBREVIATED}"),
    (f"layers {M} --roof=r.png", f"did you mean --roofline? {ABBREVIATED}"),
    (f"survey --mod {M} {DB} --dry-run", f"did you mean --models? {ABBREVIATED}"),
    (f"survey --models {M} {DB} --dry", f"did you mean --dry-run? {ABBREVIATED}"),
    (f"survey --models {M} {DB} --dry-run --exec local", f"did you mean --executor? {ABBREVIATED}"),
    ("nas search --space mbv3 --min-through 1 --simulate {store}", f"did you mean --min-throughput? {ABBREVIATED}"),
    ("nas search --space mbv3 --min-throughput 1 --simulat {store}", f"did you mean --simulate? {ABBREVIATED}"),
    ("nas search --space mbv3 --min-throughput 1 --simulate {store} --holdout", "did you mean --holdout-only?"),
    ("nas fit --space mbv3 --db {store} --table {table} --out f.json --prior-arch 0", "did you mean --prior-archs?"),
    ("calibrate --out p.json --cou 5", f"did you mean --count? {ABBREVIATED}"),
    (f"advise {M} --expo out", f"did you mean --export? {ABBREVIATED}"),
    (f"predict {M} --prof p.json", f"did you mean --profile? {ABBREVIATED}"),
    ("merge {store} --ou m.sqlite", f"did you mean --out? {ABBREVIATED}"),
    ("cache --cl", f"did you mean --clear? {ABBREVIATED}"),
    ("ceilings --ref", f"did you mean --refresh? {ABBREVIATED}"),
]

# --- stray arguments, choices, exclusive flags, types -----------------------------------------------------------

STRAY = [
    (f"count {M} {M}", "unexpected argument"),
    (f"profile {M} extra", "unexpected argument 'extra' (see: utilscope profile --help)"),
    ("devices extra", "unexpected argument 'extra'"),
    ("ceilings cpu", "unexpected argument 'cpu'"),
    ("nas analyze {store} {store}", "unexpected argument"),
    ("cache ceilings predict", "unexpected argument 'predict'"),
    ("models 'timm:*' 'torchvision:*'", "unexpected argument"),
    (f"count {M} -5", "unexpected argument '-5'"),
]
CHOICES = [
    (f"survey --models {M} {DB} --dry-run --executor rey", "--executor: invalid choice 'rey'; did you mean ray?"),
    (f"survey --models {M} {DB} --dry-run --executor ''", "argument --executor: invalid choice ''; use one of: local"),
    (f"survey --models {M} {DB} --dry-run --attribute al", "invalid choice 'al'; did you mean all?"),
    ("cache ceiling", "argument kind: invalid choice 'ceiling'; did you mean ceilings?"),
    ("cache models --clear", "invalid choice 'models'; use one of: ceilings, predict"),
    ("cache ''", "invalid choice ''"),
]
EXCLUSIVE = [
    (f"count {M} --json --csv", "argument --csv: not allowed with argument --json"),
    (f"predict {M} --gpu h200 --csv --json", "argument --json: not allowed with argument --csv"),
    ("nas predict {archs} --gpu h200 --json --csv", "not allowed with argument --json"),
    (f"count {M} --json=yes", "argument --json: ignored explicit argument 'yes'"),
]
TYPES = [
    (f"count {M} --batch lots", "argument --batch: invalid int value: 'lots'"),
    (f"count {M} --batch 2.5", "invalid int value: '2.5'"),
    (f"count {M} --res 224px", "argument --res: invalid int value: '224px'"),
    (f"count {M} --top all", "argument --top: invalid int value: 'all'"),
    (f"layers {M} --batch ''", "argument --batch: invalid int value: ''"),
    (f"profile {M} --peak fast", "argument --peak: invalid float value: 'fast'"),
    (f"profile {M} --cudnn-benchmark-limit many", "invalid int value: 'many'"),
    (f"survey --models {M} {DB} --dry-run --jobs two", "argument --jobs: invalid int value: 'two'"),
    (f"survey --models {M} {DB} --dry-run --timeout 10m", "argument --timeout: invalid float value: '10m'"),
    (f"survey --models {M} {DB} --dry-run --res ''", "argument --res: invalid int value: ''"),
    ("nas sample --space mbv3 -n 1e3 --out s.jsonl", "argument -n: invalid int value: '1e3'"),
    ("nas sample --space mbv3 --seed x --out s.jsonl", "argument --seed: invalid int value: 'x'"),
    ("nas sample --space mbv3 --flops-min lots --out s.jsonl", "invalid float value: 'lots'"),
    ("nas search --space mbv3 --min-throughput fast", "argument --min-throughput: invalid float value"),
    ("nas search --space mbv3 --min-throughput 1 --budget 1.5", "argument --budget: invalid int value: '1.5'"),
    ("nas predict {archs} --gpu h200 --batch all", "argument --batch: invalid int value: 'all'"),
    ("calibrate --out p.json --count 5k", "argument --count: invalid int value: '5k'"),
    (f"advise {M} --multiple eight", "argument --multiple: invalid int value: 'eight'"),
]

# --- empty strings where a value is needed ----------------------------------------------------------------------

EMPTY = [
    ("count ''", "empty model name"),
    ("count ' '", "empty model name"),
    (f"count {M} --dtype ''", "unknown dtype ''"),
    (f"profile {M} --device ''", "bad device ''"),
    (f"profile {M} --precision ''", "unknown precision ''"),
    (f"profile {M} --backend ''", "unknown backend ''"),
    (f"layers {M} --backend ''", "unknown backend ''"),
    ("ceilings --device ''", "bad device ''"),
    (f"predict {M} --gpu ''", "give --gpu"),
    (f"predict {M} --gpu h200 --precision ''", "unknown precision ''"),
    (f"predict {M} --gpu h200 --backend ''", "unknown backend ''"),
    (f"predict {M} --gpu h200 --batch ''", "give at least one batch size"),
    (f"predict {M} --gpu rtx_5900", "unknown GPU 'rtx_5900'; closest: rtx_5090"),
    (f"predict {M} --gpu t4 --precision bf16", "NVIDIA T4 has no bf16 unit for bf16; it has: fp32, fp16, int8"),
    (f"predict {M} --gpu h200 --price h200=free", "--price 'h200=free': give GPU=USD_per_hour"),
    (f"predict {M} --gpu t4 --precision amp --anchor resnet50=300", "--anchor 'resnet50=300': give SPEC@BATCH="),
    (f"predict {M} --gpu t4 --precision amp --anchor resnet50@8=-3", "anchor resnet50@8's throughput must be positive"),
    (f"predict {M} --gpu all --precision amp --anchor resnet50@8=30", "anchors are measurements of one GPU"),
    (f"predict {M} --gpu t4 --precision amp --anchor nosuchnet@8=30", "unknown model 'nosuchnet'"),
    (f"predict {M} --gpu t4 --precision amp --anchors ''", "empty path given for the anchors CSV"),
    (f"predict {M} --gpu h200 --precision bf16 --no-channels-last", "no device profile expresses bf16 on NCHW"),
    (f"predict {M} --gpu h200 --host-profile {{factory}}", "give --backend eager"),
    (f"predict {M} --gpu h200 --backend eager --host-profile nosuch.json", "no such file: nosuch.json"),
    ("calibrate --host --out host.txt", "must be a .json file, got 'host.txt'"),
    (f"advise {M} --device cpu --batch ''", "give at least one batch size"),
    (f"advise {M} --device cpu --ladder ''", "give at least one batch size"),
    (f"advise {M} --device cpu --backends ''", f"--backends {EMPTY_LIST}"),
    (f"advise {M} --device cpu --precisions ''", f"--precisions {EMPTY_LIST}"),
    (f"advise {M} --device cpu --precisions ' '", f"--precisions {EMPTY_LIST}"),
    (f"survey --models {M} {DB} --dry-run --device cpu --precision ''", f"--precision {EMPTY_LIST}"),
    (f"survey --models {M} {DB} --dry-run --device cpu --backend ''", f"--backend {EMPTY_LIST}"),
    (f"survey --models {M} {DB} --dry-run --device cpu --shard ''", "a shard is K/N"),
    (f"survey --models '' {DB} --dry-run", "empty model name"),
    (f"survey --family '' {DB} --dry-run", "unknown family ''"),
    (f"survey --set '' {DB} --dry-run", "unknown model set ''"),
    ("models --set ''", "unknown model set ''"),
    ("models ''", "no model matches ''"),
    ("nas sample --space '' --out s.jsonl", "unknown search space ''"),
    ("nas table --space mbv3 --device cpu --out t.json --batch ''", "batch size"),
    ("nas table --space mbv3 --device cpu --out t.json --precision ''", "unknown precision ''"),
    ("nas search --space mbv3 --min-throughput 1 --strategy '' --simulate {store}", "unknown search strategy ''"),
    ("nas search --space mbv3 --min-throughput 1 --gpu '' --simulate {store}", "unknown GPU ''"),
    ("calibrate --out p.json --precision '' --device cpu", "unknown precision ''"),
    ("calibrate --out p.json --device ''", "bad device ''"),
]

# --- model specs: unknown, malformed, a source's shape not met, globs where one model is taken -------------------

MODELS = [
    ("count torchvision:resnet5", "did you mean: torchvision:resnet50"),
    ("count timm:not_a_model_at_all", "unknown model 'timm:not_a_model_at_all'"),
    ("count timm:", "empty model name in 'timm:'"),
    ("count nope:resnet18", "unknown model source 'nope'"),
    ("predict resnet5 --gpu h200", "unknown model 'resnet5'; did you mean: torchvision:resnet50, timm:resnet50"),
    ("advise resnt50+reparam --device cpu", "unknown model 'resnt50'; did you mean: "),
    ("layers tv:resnet50 --device cpu", "unknown model source 'tv' in 'tv:resnet50'; use one of: torchvision, timm"),
    ("profile 'torchvision:resnet50 ' --device cpu --batch 0", "batch size must be"),
    (f"survey --models torchvision:resnet5@224 {DB} --dry-run", "unknown model 'torchvision:resnet5'; did you mean"),
    (f"survey --models foo:bar@224 {DB} --dry-run", "unknown model source 'foo'"),
    ("count nas:mbv3", "'nas:mbv3' is not a nas model: give archs.jsonl:ID"),
    ("count nas:mbv3:", "is not a nas model"),
    ("predict nas:mbv3 --gpu h200", "'nas:mbv3' is not a nas model"),
    ("count file:resnet", "'file:resnet' is not a file model"),
    ("count pt2:m", "'pt2:m' is not a pt2 model: give a model file of that format"),
    ("count 'nas:*'", "a glob matches torchvision and timm models, not nas ones"),
    ("count 'file:*'", "not file ones"),
    ("count 'timm:zzz*'", "no model matches 'timm:zzz*'"),
    ("count 'nope:*'", "unknown model source 'nope'"),
    ("predict 'timm:zzz*' --gpu h200", "no model matches 'timm:zzz*'"),
    ("profile 'timm:resnet*' --device cpu", f"`utilscope profile` {NO_GLOB}"),
    ("layers 'timm:resnet*' --device cpu", f"`utilscope layers` {NO_GLOB}"),
    ("advise 'timm:resnet*' --device cpu", f"`utilscope advise` {NO_GLOB}"),
    ("profile 'torchvision:resnet?8' --device cpu", "utilscope survey --models 'torchvision:resnet?8'"),
    ("advise 'resnet[15]*' --device cpu", NO_GLOB),
    ("profile '' --device cpu", "model"),
    ("models 'zzz*'", "no model matches 'zzz*'"),
    ("models --set timm-cnm", "unknown model set 'timm-cnm'"),
    ("gpus nosuchnet", "unknown model 'nosuchnet'"),
    ("gpus timm:resnt50", "unknown model 'timm:resnt50'; did you mean: timm:resnet50"),
    ("gpus timm:resnet50 --same-batch", "--same-batch applies to the summary (no model)"),
    (f"survey --family NotAFamily {DB} --dry-run", "unknown family 'NotAFamily'"),
]

CASES = _cases(
    VERBS
    + MISSING_ARGUMENTS
    + MISSING_VALUES
    + MISSPELT_FLAGS
    + ABBREVIATIONS
    + STRAY
    + CHOICES
    + EXCLUSIVE
    + TYPES
    + EMPTY
    + MODELS
)
