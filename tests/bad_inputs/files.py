"""Bad paths and bad files, over every verb that takes one: missing files and folders, folders where files are
expected (and files where folders are), empty and binary files, a SQLite database where JSON is expected and JSON
where SQLite is, another application's database, files and folders without the right to read or write them (run
without root's file rights), '' as a path, one store merged with itself. Each ends in one line naming the file and
what was expected; a verb that only reads leaves its input byte-identical (the sandbox check)."""

from bad_inputs import Case

MISSING = "no such file"
FOLDER = "is a folder"
EMPTY_PATH = "empty path"
EMPTY_FILE = "is empty"
BINARY = "not a text file"
SQLITE = "is a SQLite database"
NOT_SQLITE = "is not a SQLite database"
FOREIGN = "another application"
NOT_STORE = "not a utilscope store (an empty file)"
DENIED = "permission denied"
UNDER_FILE = "is not a folder"
NOT_JSON = "is not JSON"


def _each(templates: list[str], kinds: list[tuple]) -> list[Case]:
    """Every template (``@`` marks the path) with every kind of path: (path, phrase) or (path, phrase, True) for a
    case without root's file rights."""
    return [Case(template.replace("@", kind[0]), 2, kind[1], *kind[2:]) for template in templates for kind in kinds]


# --- JSON files read ---------------------------------------------------------------------------------------------

JSON_READERS = [
    "predict {factory}:make --profile @",
    "nas predict {archs} --profile @",
    "nas fit --space mbv3 --db {store} --table @ --out fit.json",
    "nas fit --space mbv3 --db {store} --table {table} --prior-profile @ --out fit.json",
    "nas search --space mbv3 --min-throughput 1 --simulate {store} --objective @",
    "nas search --space mbv3 --min-throughput 1 --simulate {store} --profile @",
]
JSON_KINDS = [
    ("{missing_dir}/p.json", MISSING),
    ("absent.json", MISSING),
    ("{dir_json}", FOLDER),
    ("{empty_json}", EMPTY_FILE),
    ("{binary_json}", BINARY),
    ("{sqlite_json}", SQLITE),
    ("{bad_json}", NOT_JSON),
    ("''", EMPTY_PATH),
    ("{unreadable_json}", DENIED, True),
    ("{closed}/p.json", DENIED, True),
]
# files written, and read first when they exist (resumed): never a measurement before the file is known good (the
# other ways they cannot be written are in FILE_WRITERS)
RESUMED = ["calibrate --device cpu --out @", "nas table --space mbv3 --device cpu --out @"]
RESUMED_KINDS = [
    ("{empty_json}", EMPTY_FILE),
    ("{binary_json}", BINARY),
    ("{sqlite_json}", SQLITE),
    ("{bad_json}", NOT_JSON),
    ("{list_json}", "is not a"),
    ("{unreadable_json}", DENIED, True),
]

# --- architecture files (JSON lines) -------------------------------------------------------------------------------

JSONL_READERS = [
    "count @:{arch_id}",
    "nas measure @ --device cpu --dry-run",
    "nas predict @ --gpu h200",
    "nas table --space mbv3 --device cpu --out t.json --archs @",
    "nas search --space mbv3 --min-throughput 1 --device cpu --pool @",
]
JSONL_KINDS = [
    ("{missing_dir}/a.jsonl", MISSING),
    ("absent.jsonl", MISSING),
    ("{dir_jsonl}", FOLDER),
    ("{empty_jsonl}", EMPTY_FILE),
    ("{binary_jsonl}", BINARY),
    ("{sqlite_jsonl}", SQLITE),
    ("{bad_jsonl}", "bad.jsonl:1"),
    ("{unreadable_jsonl}", DENIED, True),
    ("{closed}/a.jsonl", DENIED, True),
]

# --- stores read (never written) ----------------------------------------------------------------------------------

STORE_READERS = [
    "report @ -o out",
    "export @ out.csv",
    "nas analyze @",
    "nas search --space mbv3 --min-throughput 1 --simulate @",
    "nas fit --space mbv3 --table {table} --out fit.json --db @",
    "merge @ -o merged.sqlite",
]
STORE_KINDS = [
    ("{missing}", MISSING),
    ("{missing_dir}/s.sqlite", MISSING),
    ("{dir_sqlite}", FOLDER),
    ("{empty}", NOT_STORE),
    ("{binary}", NOT_SQLITE),
    ("{json_sqlite}", NOT_SQLITE),
    ("{text}", NOT_SQLITE),
    ("{foreign}", FOREIGN),
    ("''", EMPTY_PATH),
    ("{unreadable}", DENIED, True),
    ("{closed}/s.sqlite", DENIED, True),
]

# --- stores written -----------------------------------------------------------------------------------------------

STORE_WRITERS = [
    "survey --models {factory}:make --device cpu --dry-run --db @",
    "nas measure {archs} --device cpu --dry-run --db @",
    "survey --models {factory}:make --device cpu --db @",
]
STORE_WRITER_KINDS = [
    ("{dir_sqlite}", FOLDER),
    ("{binary}", NOT_SQLITE),
    ("{json_sqlite}", NOT_SQLITE),
    ("{foreign}", FOREIGN),
    ("''", EMPTY_PATH),
    ("{text}/s.sqlite", UNDER_FILE),
    ("{unreadable}", DENIED, True),
    ("{rodir}/s.sqlite", DENIED, True),
    ("{rostore}", DENIED, True),
    ("{closed}/s.sqlite", DENIED, True),
]

# --- factory files ------------------------------------------------------------------------------------------------

MODEL_VERBS = [
    "count @",
    "profile --device cpu @",
    "layers --device cpu @",
    "predict --gpu h200 @",
    "advise --device cpu @",
    "survey --device cpu --dry-run --models @",
]
FACTORY_KINDS = [
    ("{missing_dir}/m.py:make", MISSING),
    ("absent.py:make", MISSING),
    ("{dir_py}:make", FOLDER),
    ("{empty_py}:make", EMPTY_FILE),
    ("{sqlite_py}:make", SQLITE),
    ("{factory}:nope", "has no callable 'nope'"),
    ("{factory_syntax}:make", "SyntaxError"),
    ("{factory_import}:make", "ModuleNotFoundError"),
    ("{factory_exit}:make", "exited with code 7"),
    ("{unreadable_py}:make", DENIED, True),
    ("{closed}/models.py:make", DENIED, True),
]

# --- files and folders written ------------------------------------------------------------------------------------

FILE_WRITERS = [
    ("layers {factory}:make --device cpu --roofline @", "png"),
    ("export {store} @", "csv"),
    ("calibrate --device cpu --out @", "json"),
    ("nas sample --space mbv3 -n 2 --out @", "jsonl"),
    ("nas table --space mbv3 --device cpu --out @", "json"),
    ("nas fit --space mbv3 --db {store} --table {table} --out @", "json"),
    ("merge {store} -o @", "sqlite"),
]


def _file_writer_cases() -> list[Case]:
    cases = []
    for template, suffix in FILE_WRITERS:
        kinds = [
            ("''", EMPTY_PATH),
            (f"{{dir_{suffix}}}", FOLDER),
            (f"{{text}}/o.{suffix}", UNDER_FILE),
            (f"{{rodir}}/o.{suffix}", DENIED, True),
            (f"{{closed}}/o.{suffix}", DENIED, True),
        ]
        if suffix in ("csv", "json", "jsonl"):
            kinds.append((f"{{readonly_{suffix}}}", DENIED, True))
        cases += _each([template], kinds)
    return cases


FOLDER_WRITERS = [
    "report {store} -o @",
    "advise {factory}:make --device cpu --export @",
    "nas search --space mbv3 --min-throughput 1 --device cpu --work-dir @",
]
FOLDER_KINDS = [
    ("''", EMPTY_PATH),
    ("{text}", "is not a folder"),
    ("{text}/sub", UNDER_FILE),
    ("{rodir}", DENIED, True),
    ("{rodir}/sub", DENIED, True),
    ("{closed}", DENIED, True),
]

# --- one store twice, and what a reading verb must leave as it was ------------------------------------------------

SIMULATE = "nas search --space mbv3 --min-throughput 1 --simulate"

MERGE_AND_READ_ONLY = [
    Case("merge {store} {store} -o merged.sqlite", 2, "given twice"),
    Case("merge {store} store.sqlite -o merged.sqlite", 2, "given twice"),
    Case("merge {store} {store_link} -o merged.sqlite", 2, "given twice"),
    Case("merge {store} -o {store_link}", 2, "is also an input"),
    Case("merge {store} {empty} -o merged.sqlite", 2, NOT_STORE),
    Case("merge {store} {foreign} -o merged.sqlite", 2, FOREIGN),
    Case("merge {store} -o {foreign}", 2, FOREIGN),
    Case("merge {store} -o {json_sqlite}", 2, NOT_SQLITE),
    Case("merge {store} -o {unreadable}", 2, DENIED, True),
    Case("export {rostore} out.csv", 0, "", True, ("out.csv",)),
    Case("nas analyze {rostore}", 2, "no successful measurements", True),
    Case(f"{SIMULATE} {{empty}} --objective {{objective_text}}", 2, NOT_STORE),
    Case("calibrate --device cpu --out {table}", 2, "not a device profile"),
    Case("nas table --space mbv3 --device cpu --out {sqlite_json} --archs {binary_jsonl}", 2, BINARY),
    Case(f"{SIMULATE} {{store}} --objective {{list_json}}", 2, "mapping architecture id"),
    Case(f"{SIMULATE} {{store}} --objective {{objective_text}}", 2, "not a number"),
    Case("layers {factory}:make --device cpu --roofline {dir_png}/r.png --res 0", 2, "resolution"),
]

CASES = [
    *_each(JSON_READERS, JSON_KINDS),
    *_each(RESUMED, RESUMED_KINDS),
    *_each(JSONL_READERS, JSONL_KINDS),
    *_each(STORE_READERS, STORE_KINDS),
    *_each(STORE_WRITERS, STORE_WRITER_KINDS),
    *_each(MODEL_VERBS, FACTORY_KINDS),
    *_file_writer_cases(),
    *_each(FOLDER_WRITERS, FOLDER_KINDS),
    *MERGE_AND_READ_ONLY,
]
