"""Every shell and Python example in README.md and docs/ runs as written against a fresh
local stack, in the order a newcomer reads them (the README, then the docs in the README's
list), one stack for all of them.

What "as written" allows, and nothing more:
- the stack listens on a port of its own: `http://127.0.0.1:8000` and `localhost:8000` in an
  example are that port;
- the examples run in a scratch folder that has the checkout's `.venv` and `examples/`, and
  the stack's `.memkit/` (its development key, which `memkit token` signs with), with
  `.venv/bin` on PATH, `MEMKIT_URL` and `MEMKIT_TOKEN` set as `make serve` prints them, and
  no AWS credentials;
- a `curl` must answer 2xx, unless the comment right after it says `# -> <status>`: then
  that status; a `# -> ...` line is illustrative output, never compared;
- the shell examples of one file run as one bash script (`set -euo pipefail`), so a variable
  set in one block serves the next; each Python example runs on its own.

An example that cannot run here says why on the line before its fence:
`<!-- not run: <reason> -->` (AWS, the network, or the command that runs this test).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memkit_dev.local.auth import JwtSettings, mint
from memkit_dev.local.stack import LocalStack, LocalStackConfig
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

FENCE = re.compile(
    r"^(?:[ ]*<!-- not run: (?P<reason>[^>]+?) -->\n)?"
    r"(?P<indent>[ ]*)```(?P<lang>sh|bash|python)\n(?P<body>.*?)^(?P=indent)```",
    re.DOTALL | re.MULTILINE,
)
STATUS = re.compile(r"^\s*# -> (?P<status>[1-5]\d\d)\b")


@dataclass(frozen=True)
class Example:
    path: Path
    line: int
    lang: str
    body: str
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """README.md, then the docs in the order the README lists them, then any others."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^- \[docs/([\w-]+\.md)\]", readme, re.MULTILINE)
    ordered = [ROOT / "docs" / name for name in dict.fromkeys(listed)]
    rest = sorted(set((ROOT / "docs").glob("*.md")) - set(ordered))
    return [ROOT / "README.md", *ordered, *rest]


def examples(path: Path) -> list[Example]:
    text = path.read_text(encoding="utf-8")
    return [
        Example(
            path,
            text.count("\n", 0, match.start("lang")) + 1,
            match["lang"],
            "".join(
                line.removeprefix(match["indent"])
                for line in match["body"].splitlines(keepends=True)
            ),
            match["reason"],
        )
        for match in FENCE.finditer(text)
    ]


def _expecting(script: str) -> str:
    """The shell script with `EXPECT=<status>` before each curl whose next comment line says
    `# -> <status>` (a command ends at a line that neither continues with \\ nor leaves a
    single quote open)."""
    lines = script.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not re.match(r"^\s*(?:\w+=\$\()?curl ", line):
            out.append(line)
            index += 1
            continue
        command = [line]
        quotes = line.count("'")
        while (line.rstrip().endswith("\\") or quotes % 2) and index + 1 < len(lines):
            index += 1
            line = lines[index]
            quotes += line.count("'")
            command.append(line)
        after = lines[index + 1] if index + 1 < len(lines) else ""
        expected = STATUS.match(after)
        out.append(f"EXPECT={expected['status'] if expected else '2xx'}")
        out.extend(command)
        index += 1
    return "\n".join(out) + "\n"


# curl as written, held to the status the example expects; its body printed as curl would.
PRELUDE = r"""set -euo pipefail
EXPECT=2xx
curl() {
  local out code want="$EXPECT"
  EXPECT=2xx
  out=$(command curl --max-time 60 -w '\n%{http_code}' "$@")
  code=${out##*$'\n'}
  printf '%s\n' "${out%$'\n'*}"
  if [[ $want == 2xx && $code != 2* ]] || [[ $want != 2xx && $code != "$want" ]]; then
    echo "curl $*: HTTP $code, expected $want" >&2
    return 22
  fi
}
"""


def _as_written(body: str, url: str) -> str:
    """`body` with the written address of `make serve` replaced by the stack's."""
    host = url.split("//", 1)[1]
    body = body.replace("http://127.0.0.1:8000", url).replace("http://localhost:8000", url)
    return body.replace("localhost:8000", host)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    data = tmp_path_factory.mktemp("doc-stack")
    config = LocalStackConfig(
        port=0,
        concurrency=2,
        template=ROOT / "template.yaml",
        engine="moto",
        cleanup_interval_seconds=0,
        auth="jwt",
        jwt=JwtSettings(data_dir=data),
        data_dir=data,
        table_name="memkit-docs",
    )
    with LocalStack(config) as running:
        yield running


@pytest.fixture(scope="module")
def workdir(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    here = tmp_path_factory.mktemp("reader")
    (here / ".venv").symlink_to(ROOT / ".venv")
    (here / "examples").symlink_to(ROOT / "examples")
    assert stack.config.data_dir is not None
    (here / ".memkit").symlink_to(stack.config.data_dir)
    return here


def _environment(stack: LocalStack) -> dict[str, str]:
    """A newcomer's shell with `make serve` running: no AWS credentials, the banner's two
    variables exported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMKIT_"))}
    assert stack.config.data_dir is not None
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["MEMKIT_URL"] = stack.url
    env["MEMKIT_TOKEN"] = mint(
        stack.config.data_dir, "dev", "default", ["memory:read", "memory:write"]
    )
    return env


def test_every_example_is_run_or_says_why_not() -> None:
    found = [example for path in documents() for example in examples(path)]
    skipped = [example for example in found if example.not_run]

    assert len(found) - len(skipped) >= 20  # most are run
    assert all(len((example.not_run or "").strip()) > 10 for example in skipped)


def _run(command: list[str], workdir: Path, env: dict[str, str]) -> tuple[str, str | None]:
    """What `command` printed, and None when it exits 0, else the end of its output."""
    done = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode == 0:
        return done.stdout, None
    return done.stdout, f"{done.stdout[-2500:]}\n{done.stderr[-2500:]}"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_examples_run_as_written_in_reading_order(stack: LocalStack, workdir: Path) -> None:
    env = _environment(stack)
    python = str(ROOT / ".venv" / "bin" / "python")
    failed: list[str] = []
    printed: dict[str, str] = {}
    for path in documents():
        runnable = [example for example in examples(path) if not example.not_run]
        shell = [example for example in runnable if example.lang in ("sh", "bash")]
        if shell:
            script = PRELUDE + "".join(
                f"# --- {example.where}\n{_expecting(_as_written(example.body, stack.url))}"
                for example in shell
            )
            printed[path.name], problem = _run(["bash", "-c", script], workdir, env)
            if problem is not None:
                failed.append(f"{path.name}'s shell examples:\n{problem}")
        for example in runnable:
            if example.lang == "python":
                _, problem = _run(
                    [python, "-c", _as_written(example.body, stack.url)], workdir, env
                )
                if problem is not None:
                    failed.append(f"{example.where}:\n{problem}")

    assert not failed, "\n\n".join(failed)
    # And the README's tour did what its comments say
    tour = printed["README.md"].replace(" ", "")
    assert '"likes":["tea","chess"]' in tour
    assert '"created":["tea","oslo"]' in tour
    # (its search, run right after the create and the wait for indexing, finds the record)
    assert '"id":"tea"' in tour
