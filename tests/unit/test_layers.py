"""The package layering: no upward imports, no cycles, raw keys and the key module stay in store/.

Layers, top to bottom: handlers > agentcore > {api, mcp_server} > app > jobs > service >
{store, vectors, embeddings, llm} > {models, scratchpad} > base modules. Every import counts
(lazy and type-only ones too). AgentCore is a wing (rule 11): it stands on the core, and only
the composition root (memkit.handlers.wiring) imports it.
The checkers take (module name, source text) and return (module, line, what) violations.
The SDK (memkit.client, sdk/) sits on the models beside the dev kit, outside the layer.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import TypeGuard

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "layers" / "memkit" / "memkit"
DEVKIT = ROOT / "devkit" / "memkit_dev"
SDK = ROOT / "sdk" / "memkit" / "client"
FUNCTIONS = ROOT / "functions"
# What the SDK may use of the library: the API's models and the tool names, no server code.
SDK_MAY_IMPORT = ("memkit.models", "memkit.scratchpad.tools", "memkit.ids")

SIBLINGS = {"store", "vectors", "embeddings", "llm"}  # one layer, but kept apart
# The MCP server is an edge beside the HTTP API's resolver: it runs the same services.
LAYERS = [
    "handlers",
    "agentcore",
    "api mcp_server",
    "app",
    "jobs",
    "service",
    " ".join(SIBLINGS),
    "models scratchpad",
    "base",
]
RANK = {part: len(LAYERS) - i for i, layer in enumerate(LAYERS) for part in layer.split()}
BASE_MODULES = {
    "config",
    "errors",
    "identity",
    "ids",
    "keyparts",
    "text",
    "times",
    "tokens",
    "versions",
    "observability",
}
RAW_KEYS = {"PK", "SK", "NewImage", "OldImage", "Keys", "LSI1SK", "dynamodb"}
RAW_KEYS |= {f"GSI{n}{k}" for n in (1, 2, 3) for k in ("PK", "SK")}
# A wing's table: its items live in the one table beside the core's, so its table module
# keys them with the store's key parts (rules 3 and 4), as the store's own tables do.
WING_STORAGE = {"memkit.agentcore.table"}

Violation = tuple[str, int, str]


@cache
def sources(root: Path, base: Path | None = None) -> dict[str, str]:
    """Module name -> source text, for every module of the package at root (named from base,
    by default root's parent)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(base or root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return found


def part_of(name: str) -> str:
    pieces = name.split(".")
    return pieces[1] if len(pieces) > 1 and pieces[1] in RANK else "base"


def is_type_checking(node: ast.AST) -> TypeGuard[ast.If]:
    test = node.test if isinstance(node, ast.If) else None
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def imports(node: ast.AST, top_level: bool = False) -> Iterator[tuple[int, str, str]]:
    """(line, imported name, module named in the statement) for every import under node.

    top_level: only what runs on import (skips function bodies and `if TYPE_CHECKING:`).
    """
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield node.lineno, alias.name, alias.name
    elif isinstance(node, ast.ImportFrom):
        source = "." * node.level + (node.module or "")
        for alias in node.names:
            sep = "" if alias.name == "*" or source.endswith(".") else "."
            yield node.lineno, source + sep + alias.name.replace("*", ""), source
    if top_level and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        return
    children = node.orelse if top_level and is_type_checking(node) else ast.iter_child_nodes(node)
    for child in children:
        yield from imports(child, top_level)


def check_layers(module: str, source: str) -> list[Violation]:
    """Rule 1: imports go to the same layer or lower; siblings stay apart; no dev kit."""
    own, found = part_of(module), []
    pieces = module.split(".")
    if len(pieces) > 1 and pieces[1] not in RANK and pieces[1] not in BASE_MODULES:
        found.append((module, 1, "module is in no layer (add it to RANK or BASE_MODULES)"))
    for line, name, _ in imports(ast.parse(source)):
        top, part = name.split(".")[0], part_of(name)
        if name.startswith("."):
            found.append((module, line, f"relative import {name}"))
        elif top == "memkit_dev":
            found.append((module, line, f"imports the dev kit: {name}"))
        elif top != "memkit":
            continue
        elif RANK[part] > RANK[own]:
            found.append((module, line, f"imports {name} from a higher layer ({part} > {own})"))
        elif part != own and {part, own} <= SIBLINGS:
            found.append((module, line, f"imports {name}: {own} may not import {part}"))
    return found


def resolve(name: str, modules: dict[str, str]) -> str:
    """The module an imported name lives in: the longest prefix that is a module."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def import_graph(library: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the library modules it imports when it is imported (top level, not typing)."""
    graph = {}
    for module, source in library.items():
        names = {n for _, n, _ in imports(ast.parse(source), top_level=True)}
        targets = {resolve(n, library) for n in names if n.startswith("memkit.")}
        graph[module] = (targets & library.keys()) - {module}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle closed by a back edge of a depth-first search, as a path a -> ... -> a."""
    cycles: list[list[str]] = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def check_keys_import(module: str, source: str) -> list[Violation]:
    """Rule 3: only modules under memkit.store (and a wing's table) may import its keys."""
    if module == "memkit.store" or module.startswith("memkit.store.") or module in WING_STORAGE:
        return []
    return [
        (module, line, f"imports {name}")
        for line, name, _ in imports(ast.parse(source))
        if name == "memkit.store.keys" or name.startswith("memkit.store.keys.")
    ]


def check_raw_keys(module: str, source: str) -> list[Violation]:
    """Rule 4: outside store/ (and a wing's table), no raw item or stream key as a subscript
    or a .get() key."""
    if module == "memkit.store" or module.startswith("memkit.store.") or module in WING_STORAGE:
        return []
    found = []
    for node in ast.walk(ast.parse(source)):
        key: ast.AST | None = None
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            key = node.args[0] if node.func.attr == "get" else None
        if isinstance(key, ast.Constant) and key.value in RAW_KEYS:
            found.append((module, node.lineno, f"reads raw key {key.value!r}"))
    return sorted(found)


def check_shim(function: str, source: str) -> list[Violation]:
    """Rule 6: a function shim imports its handler's lambda_handler once (and gc, for the HTTP
    API's functions: api, mcp)."""
    allowed = {f"memkit.handlers.{function}.lambda_handler"}
    if function in ("api", "mcp"):
        allowed.add("gc")
    names = [(line, name) for line, name, _ in imports(ast.parse(source))]
    found = [(function, line, f"imports {name}") for line, name in names if name not in allowed]
    handler = [line for line, name in names if name.endswith(".lambda_handler")]
    if len(handler) != 1:
        found.append((function, 1, f"imports lambda_handler {len(handler)} times, not once"))
    return found


def run(checker: Callable[[str, str], list[Violation]], modules: dict[str, str]) -> list[Violation]:
    return [v for module, source in modules.items() for v in checker(module, source)]


def report(violations: list[Violation]) -> str:
    lines = [f"  {module}:{line}: {what}" for module, line, what in violations]
    return f"{len(violations)} violation(s):\n" + "\n".join(lines)


def test_modules_import_only_their_own_layer_or_lower() -> None:
    """Rule 1: no upward import, no import between store/vectors/embeddings/llm, no dev kit."""
    violations = run(check_layers, sources(LIBRARY))
    assert not violations, report(violations)


def test_library_modules_import_each_other_without_cycles() -> None:
    """Rule 2: the module-level imports between library modules form no cycle."""
    cycles = find_cycles(import_graph(sources(LIBRARY)))
    assert not cycles, "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in cycles)


def test_only_the_store_imports_the_key_module() -> None:
    """Rule 3: memkit.store.keys is private to memkit.store."""
    violations = run(check_keys_import, sources(LIBRARY))
    assert not violations, report(violations)


def test_only_the_store_reads_raw_item_and_stream_keys() -> None:
    """Rule 4: PK/SK/GSI keys, NewImage/OldImage/Keys and record["dynamodb"] stay in store/."""
    violations = run(check_raw_keys, sources(LIBRARY))
    assert not violations, report(violations)


def test_the_dev_kit_sits_on_top_of_the_library() -> None:
    """Rule 5: nothing in the library or shims imports memkit_dev; the dev kit's imports exist."""
    library = sources(LIBRARY)
    shims = {str(p.relative_to(ROOT)): p.read_text() for p in FUNCTIONS.glob("*/*.py")}
    violations = [
        (module, line, f"imports the dev kit: {name}")
        for module, source in {**library, **shims}.items()
        for line, name, _ in imports(ast.parse(source))
        if name.split(".")[0] == "memkit_dev"
    ]
    known = library.keys() | sources(SDK, SDK.parents[1]).keys()
    violations += [
        (module, line, f"imports {statement}, which is not a library or SDK module")
        for module, source in sources(DEVKIT).items()
        for line, _, statement in imports(ast.parse(source))
        if statement.split(".")[0] == "memkit" and statement not in known
    ]
    assert not violations, report(violations)


def check_sdk(module: str, source: str) -> list[Violation]:
    """Rule 7: the SDK imports the API's models, the tool names and ids, never server code
    (the service, the store, handlers) nor the dev kit."""
    found = []
    for line, name, _ in imports(ast.parse(source)):
        top = name.split(".")[0]
        if top == "memkit_dev" or name.startswith("."):
            found.append((module, line, f"imports {name}"))
        elif top == "memkit" and not name.startswith(("memkit.client", *SDK_MAY_IMPORT)):
            found.append((module, line, f"imports {name}, which is server code"))
    return found


def test_the_sdk_uses_only_the_models_of_the_library() -> None:
    """Rule 7: memkit.client imports memkit.models, the tool names and ids, and itself."""
    modules = sources(SDK, SDK.parents[1])
    assert "memkit.client.api" in modules
    violations = run(check_sdk, modules)
    assert not violations, report(violations)


def test_the_sdk_is_not_in_the_lambda_layer() -> None:
    """Rule 8: `sam build` packs the layer's ContentUri (layers/memkit/) whole; the SDK's source
    is outside it, and nothing the layer or a function runs imports the SDK."""
    from memkit_dev.local.template import load_template

    layer = load_template(ROOT / "template.yaml")["Resources"]["MemkitLayer"]["Properties"]
    packed = (ROOT / layer["ContentUri"]).resolve()
    assert packed == LIBRARY.parent
    shipped = [p.relative_to(packed).as_posix() for p in packed.rglob("*") if p.is_file()]
    assert "memkit/__init__.py" in shipped
    assert not [p for p in shipped if p.startswith("memkit/client")]
    assert not SDK.resolve().is_relative_to(packed)
    shims = {str(p.relative_to(ROOT)): p.read_text() for p in FUNCTIONS.glob("*/*.py")}
    violations = [
        (module, line, f"imports the SDK: {name}")
        for module, source in {**sources(LIBRARY), **shims}.items()
        for line, name, _ in imports(ast.parse(source))
        if name == "memkit.client" or name.startswith("memkit.client.")
    ]
    assert not violations, report(violations)


def test_the_sdk_checker_reports_server_code_and_the_dev_kit() -> None:
    """Rule 7 is not vacuous: the service, the store and the dev kit are reported."""
    assert check_sdk("memkit.client.x", "from memkit.service import tools\n")
    assert check_sdk("memkit.client.x", "import memkit.store.sessions\n")
    assert check_sdk("memkit.client.x", "from memkit_dev import cli\n")
    assert not check_sdk("memkit.client.x", "from memkit.models.api import ToolsView\n")
    assert not check_sdk("memkit.client.x", "from memkit.client.calls import Call\n")


def test_function_shims_import_only_their_handler() -> None:
    """Rule 6: functions/<name>/*.py import memkit.handlers.<name>.lambda_handler (+ gc for the
    HTTP API's functions)."""
    shims = sorted(FUNCTIONS.glob("*/*.py"))
    assert shims, "no function shims found"
    violations = [v for p in shims for v in check_shim(p.parent.name, p.read_text())]
    assert not violations, report(violations)


def test_the_layer_checker_reports_upward_lazy_type_only_sibling_and_dev_kit_imports() -> None:
    """Rules 1 and 3 are not vacuous: synthetic bad imports are reported, allowed ones are not."""
    upward = "def f():\n    from memkit.api.context import RequestContext\n"
    [(module, line, what)] = check_layers("memkit.service.x", upward)
    assert (module, line) == ("memkit.service.x", 2)
    assert what == "imports memkit.api.context.RequestContext from a higher layer (api > service)"
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import memkit.jobs.users\n"
    assert check_layers("memkit.store.x", typed)
    assert check_layers("memkit.store.x", "from memkit.llm import local\n")
    assert check_layers("memkit.vectors.x", "from memkit.embeddings import local\n")
    assert check_layers("memkit.vectors.x", "from memkit.embeddings import wordpiece\n")
    assert not check_layers("memkit.vectors.x", "from memkit.text import words\n")
    assert check_layers("memkit.config", "import memkit_dev.cli\n")
    assert check_layers("memkit.config", "from . import errors\n")
    assert check_keys_import("memkit.jobs.x", "from memkit.store import keys\n")
    assert not check_keys_import("memkit.store.x", "from memkit.store import keys\n")


def test_the_raw_key_checker_reports_a_stream_read_outside_the_store() -> None:
    """Rule 4 is not vacuous: record["dynamodb"]["NewImage"] in a jobs module is reported."""
    stream = 'def f(record):\n    return record["dynamodb"]["NewImage"].get("PK")\n'
    assert check_raw_keys("memkit.jobs.x", stream) == [
        ("memkit.jobs.x", 2, f"reads raw key {key!r}") for key in ("NewImage", "PK", "dynamodb")
    ]
    assert not check_raw_keys("memkit.store.x", stream)


def test_the_cycle_finder_and_shim_checker_report_what_they_should() -> None:
    """Rules 2 and 6 are not vacuous: a module-level cycle and a stray shim import are reported."""
    graph = import_graph({"memkit.a": "import memkit.b\n", "memkit.b": "from memkit import a\n"})
    assert find_cycles(graph) == [["memkit.a", "memkit.b", "memkit.a"]]
    lazy = {"memkit.a": "import memkit.b\n", "memkit.b": "def f():\n    import memkit.a\n"}
    assert not find_cycles(import_graph(lazy))
    assert check_shim("worker", "import os\nfrom memkit.handlers.worker import lambda_handler\n")
    assert not check_shim("worker", "from memkit.handlers.worker import lambda_handler\n")


# -- rule 9: a store of composed tables, and Protocols only where a fake stands in -------------

# VectorIndex, Rebuild, RebuildableIndex, Embedder, MemoryModel, Phase, CursorStore,
# RecordListing, the tools' LongTermMemory, PadStore and ProfileStore: each has another
# implementation (an adapter, a backend, a fake in tests/ or bench/).
MAX_PROTOCOLS = 12


def _bases(node: ast.ClassDef) -> list[str]:
    return [getattr(base, "id", getattr(base, "attr", "")) for base in node.bases]


def check_protocols(module: str, source: str) -> list[Violation]:
    """Every Protocol class the module declares (one violation each: they are counted)."""
    return [
        (module, node.lineno, f"declares Protocol {node.name}")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef) and "Protocol" in _bases(node)
    ]


def check_store_tables(module: str, source: str) -> list[Violation]:
    """A table of the store (a class named *Table, and DynamoStore) inherits nothing: the
    store composes them over the shared Table helper."""
    if not module.startswith("memkit.store."):
        return []
    return [
        (module, node.lineno, f"{node.name} inherits {', '.join(_bases(node))}")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef)
        and (node.name.endswith("Table") or node.name == "DynamoStore")
        and node.bases
    ]


def test_the_layer_declares_few_protocols() -> None:
    """Rule 9: at most MAX_PROTOCOLS Protocol classes in the layer (a Protocol is for a part
    with more than one implementation; the rest take the concrete class)."""
    found = run(check_protocols, sources(LIBRARY))
    assert len(found) <= MAX_PROTOCOLS, report(found)


def test_the_stores_tables_are_composed_not_inherited() -> None:
    """Rule 9: DynamoStore holds its tables; no table class inherits another."""
    violations = run(check_store_tables, sources(LIBRARY))
    assert not violations, report(violations)
    composed = sources(LIBRARY)["memkit.store.dynamodb"]
    assert "class DynamoStore:" in composed


def test_the_protocol_and_table_checkers_report_what_they_look_for() -> None:
    """Rule 9 is not vacuous."""
    protocol = "from typing import Protocol\nclass Reader(Protocol):\n    pass\n"
    assert check_protocols("memkit.jobs.x", protocol) == [
        ("memkit.jobs.x", 2, "declares Protocol Reader")
    ]
    chained = "class SessionTable(TableBase):\n    pass\n"
    assert check_store_tables("memkit.store.x", chained)
    assert not check_store_tables("memkit.store.x", "class SessionTable:\n    pass\n")
    assert not check_store_tables("memkit.jobs.x", chained)


# -- rule 10: one application layer under both front doors ----------------------------------

# What decides the scope a caller acts in (memkit.app.access), and the identity's own rule.
CONFINEMENT = {
    "owner_for",
    "confined_search",
    "confined_memories",
    "confined_prompt",
    "charge",
    "pad_ref",
    "acting_for",
}
# The front doors: the HTTP API's, the MCP server's, and the AgentCore wing's routes.
EDGES = (
    "memkit.api",
    "memkit.mcp_server",
    "memkit.agentcore.routes",
    "memkit.agentcore.record_routes",
)


def check_edge_confinement(module: str, source: str) -> list[Violation]:
    """Rule 10: an edge module neither calls nor imports a confinement function: it passes
    the names its request gives to an operation (memkit.app.operations), which confines."""
    if not module.startswith(EDGES):
        return []
    found = [
        (module, line, f"imports {name}")
        for line, name, _ in imports(ast.parse(source))
        if name.rsplit(".", 1)[-1] in CONFINEMENT or name.startswith("memkit.app.access")
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            called = getattr(node.func, "id", getattr(node.func, "attr", None))
            if called in CONFINEMENT:
                found.append((module, node.lineno, f"calls {called}"))
    return found


def test_no_edge_confines_a_caller() -> None:
    """Rule 10: 0 confinement calls in api/ and mcp_server/ (the operations confine)."""
    violations = run(check_edge_confinement, sources(LIBRARY))
    assert not violations, report(violations)


def test_the_mcp_server_imports_nothing_from_the_http_api() -> None:
    """Rule 10: both edges stand on memkit.app; neither imports the other."""
    violations = [
        (module, line, f"imports {name}")
        for module, source in sources(LIBRARY).items()
        if module.startswith("memkit.mcp_server")
        for line, name, _ in imports(ast.parse(source))
        if name.startswith("memkit.api")
    ]
    assert not violations, report(violations)


def test_prompt_hydration_is_built_in_one_place() -> None:
    """Rule 10: PromptService is built once, by the services (memkit.app.services)."""
    built = [
        (module, node.lineno)
        for module, source in sources(LIBRARY).items()
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "PromptService"
    ]
    assert [module for module, _ in built] == ["memkit.app.services"], built


def test_the_edge_checker_reports_confinement() -> None:
    """Rule 10 is not vacuous."""
    assert check_edge_confinement(
        "memkit.api.routes.x", "from memkit.app.access import owner_for\nowner_for(c, n, u)\n"
    ) == [
        ("memkit.api.routes.x", 1, "imports memkit.app.access.owner_for"),
        ("memkit.api.routes.x", 2, "calls owner_for"),
    ]
    assert check_edge_confinement("memkit.mcp_server.x", "caller.acting_for(user)\n")
    assert not check_edge_confinement("memkit.app.x", "caller.acting_for(user)\n")


# -- rule 11: AgentCore is a wing ------------------------------------------------------------

WING = "memkit.agentcore"
# The composition root: it plugs the wing into the core's hooks (memkit.api.wings' Wing,
# curation's strategies and Policy.extracted_anyway, compaction's scope_of, the worker's jobs).
PLUGS_WINGS = {"memkit.handlers.wiring"}


def check_wing_imports(module: str, source: str) -> list[Violation]:
    """Rule 11: a core module (outside the wing and the composition root) imports nothing
    of the wing's, lazily or for types either."""
    if module == WING or module.startswith(WING + ".") or module in PLUGS_WINGS:
        return []
    return [
        (module, line, f"imports {name}")
        for line, name, _ in imports(ast.parse(source))
        if name == WING or name.startswith(WING + ".")
    ]


def test_only_the_composition_root_imports_the_agentcore_wing() -> None:
    """Rule 11: AgentCore lives in memkit/agentcore/ and touches the core only through the
    hooks the composition root fills; no other core module names it."""
    library = sources(LIBRARY)
    assert {"memkit.agentcore.wing", "memkit.agentcore.table", "memkit.agentcore.routes"} <= set(
        library
    )
    violations = run(check_wing_imports, library)
    assert not violations, report(violations)


def test_the_wing_checker_reports_a_core_import_of_the_wing() -> None:
    """Rule 11 is not vacuous: a lazy import of the wing in a core module is reported."""
    lazy = "def f():\n    from memkit.agentcore.table import agentcore_table\n"
    assert check_wing_imports("memkit.jobs.x", lazy) == [
        ("memkit.jobs.x", 2, "imports memkit.agentcore.table.agentcore_table")
    ]
    assert not check_wing_imports("memkit.handlers.wiring", lazy)
    assert not check_wing_imports("memkit.agentcore.wing", lazy)
