"""Checks the answers before anything is written, and says what is wrong.

Runs in the new project's folder (cookiecutter made it empty). On success it
leaves `.template-spec.json` there: the parsed state machine, which
post_gen_project.py turns into src/machine.rs and events/. On an error it
prints one line per problem and exits 1; cookiecutter (and `sam init`) then
removes the folder.
"""

import json
import os
import re
import sys

PROJECT = {{ cookiecutter.project_name|tojson }}
ENTITY = {{ cookiecutter.entity|tojson }}
EVENTS = {{ cookiecutter.events|tojson }}
ARCHITECTURE = {{ cookiecutter.architecture|tojson }}
HTTP_API = {{ cookiecutter.include_http_api|tojson }}
LIBRARY_PATH = {{ cookiecutter.library_path|tojson }}
REPO_DIR = {{ cookiecutter._repo_dir|tojson }}
# Where the published sources live, for a project made from a copy of the
# template that is not inside a checkout (sam init from a git URL).
REPOSITORY = "https://github.com/idempotent-lambda/lambda-idempotency"

# Rust's keywords (strict and reserved, 2024 edition): none may name the
# crate or the entity's modules and fields.
RUST_KEYWORDS = set(
    """as async await break const continue crate dyn else enum extern false fn for
    gen if impl in let loop match mod move mut pub ref return self Self static struct
    super trait true type unsafe use where while abstract become box do final macro
    override priv try typeof unsized virtual yield union""".split()
)
# Names the generated code itself uses: an event or entity named like one of
# them would not compile, or would read wrongly.
TAKEN_TYPES = {
    "EventType", "Event", "Outcome", "Handler", "Stored", "Function", "Settings",
    "Applied", "Duplicate", "Stale", "Early", "Rejected", "Conflict", "Option",
    "Result", "String", "Some", "None", "Ok", "Err", "Vec", "Box",
}

errors = []


def error(msg):
    errors.append(msg)


def pascal(snake):
    return "".join(p.capitalize() for p in snake.split("_"))


# ---- the project name: a Cargo package, a binary, a CloudFormation stack ---
if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", PROJECT):
    error(
        f"project_name `{PROJECT}`: use lower-case letters, digits and single hyphens, "
        "starting with a letter (e.g. booking-consumer)"
    )
elif PROJECT.replace("-", "_") in RUST_KEYWORDS:
    error(f"project_name `{PROJECT}` is a Rust keyword; the crate could not be named after it")
elif len(PROJECT) > 40:
    error(f"project_name `{PROJECT}` is over 40 characters (it prefixes AWS resource names)")

# ---- the entity ------------------------------------------------------------
if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", ENTITY):
    error(
        f"entity `{ENTITY}` is not a Rust identifier in snake_case: use lower-case letters, "
        "digits and single underscores, singular (e.g. booking or room_booking)"
    )
elif ENTITY in RUST_KEYWORDS:
    error(f"entity `{ENTITY}` is a Rust keyword")
elif pascal(ENTITY) in TAKEN_TYPES:
    error(f"entity `{ENTITY}` would name the type `{pascal(ENTITY)}`, which the generated code uses")

# ---- the options -----------------------------------------------------------
if ARCHITECTURE not in ("arm64", "x86_64"):
    error(f"architecture `{ARCHITECTURE}`: arm64 or x86_64")
if HTTP_API not in ("yes", "no"):
    error(f"include_http_api `{HTTP_API}`: yes or no")

# ---- the events: `Name:FROM|FROM->TO`, comma-separated ---------------------
events = []
items = [e.strip() for e in EVENTS.replace("\n", ",").split(",") if e.strip()]
if not items:
    error("events: the list is empty; give at least `Created:->NEW, Next:NEW->DONE`")
for item in items:
    m = re.fullmatch(r"([^:\s]+)\s*:\s*([^>]*?)\s*->\s*(\S+)", item)
    if not m:
        error(f"event `{item}`: write it as `Name:FROM->TO`, `Name:A|B->TO` or `Name:->TO` (creates the {ENTITY})")
        continue
    name, sources, target = m.group(1), m.group(2).strip().rstrip("-").strip(), m.group(3)
    ok = True
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", name):
        error(f"event `{name}`: an event type is a PascalCase Rust identifier (e.g. BookingConfirmed)")
        ok = False
    elif name in RUST_KEYWORDS or name in TAKEN_TYPES:
        error(f"event `{name}` is a reserved word or a name the generated code uses")
        ok = False
    states = [s.strip() for s in sources.split("|")] if sources else []
    for st in states + [target]:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", st):
            error(f"event `{name}`: state `{st}` must be UPPER_SNAKE_CASE (e.g. CONFIRMED)")
            ok = False
    if len(set(states)) != len(states):
        error(f"event `{name}` lists a source state twice")
        ok = False
    if ok:
        events.append({"name": name, "from": states, "to": target})

names = [e["name"] for e in events]
for n in sorted({n for n in names if names.count(n) > 1}):
    error(f"event `{n}` is listed more than once")

if events:
    targets = {e["to"] for e in events}
    for e in events:
        for st in e["from"]:
            if st not in targets:
                error(
                    f"event `{e['name']}` follows state `{st}`, which no event leads to "
                    f"(known states: {', '.join(sorted(targets))})"
                )
    initial = [e for e in events if not e["from"]]
    if not initial:
        error(f"events: none creates the {ENTITY}; give one as `Name:->STATE`")
    if len(events) < 2:
        error("events: give at least two (one that creates the entity, one transition)")
    # Every event must be able to apply: its source states reachable from a
    # creating event.
    reached, frontier = set(), {e["to"] for e in initial}
    while frontier:
        reached |= frontier
        frontier = {e["to"] for e in events if set(e["from"]) & reached} - reached
    for e in events:
        if e["from"] and not set(e["from"]) & reached:
            error(f"event `{e['name']}` can never apply: none of {', '.join(e['from'])} is reachable")

# ---- where the library comes from -----------------------------------------
def checkout_of(template_dir):
    root = os.path.dirname(os.path.abspath(template_dir))
    if os.path.isfile(os.path.join(root, "crates", "lambda-idempotency", "Cargo.toml")):
        return root
    return None

library = None
if LIBRARY_PATH:
    lib = os.path.abspath(os.path.expanduser(LIBRARY_PATH))
    if not os.path.isfile(os.path.join(lib, "crates", "lambda-idempotency", "Cargo.toml")):
        error(f"library_path `{LIBRARY_PATH}`: no crates/lambda-idempotency/Cargo.toml there")
    library = lib
else:
    # cookiecutter gives the template's folder as it was named on the
    # command line: relative to the caller's folder (PWD), not to this one.
    for cand in (REPO_DIR, os.path.join(os.environ.get("PWD", ""), REPO_DIR)):
        if os.path.isabs(cand) and checkout_of(cand):
            library = checkout_of(cand)
            break

if errors:
    print("", file=sys.stderr)
    print("The template was not instantiated:", file=sys.stderr)
    for e in errors:
        print(f"  - {e}", file=sys.stderr)
    print("", file=sys.stderr)
    sys.exit(1)

with open(".template-spec.json", "w") as f:
    json.dump(
        {
            "entity": ENTITY,
            "events": events,
            "library": library,
            "repository": REPOSITORY,
            "raw": ", ".join(
                f"{e['name']}:{'|'.join(e['from'])}->{e['to']}" for e in events
            ),
        },
        f,
        indent=2,
    )
