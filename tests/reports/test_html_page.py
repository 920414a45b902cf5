"""``gen-repo report`` (generator/reports/html_page.py, charts.py, ensemble_svg.py, cli/report.py) as a person sees it.

The zoo repository (every model and the bert_classifier ensemble) with the real ``gen-repo smoke --json`` and
``gen-repo perf --json`` of a real tritonserver is rendered by the real command and opened in Debian's headless
Chromium: a screenshot that is not blank, the DOM Chromium built with every model, chart and the ensemble's picture,
Chromium's own network log showing that the page fetched nothing, and html5lib's strict parser finding no parse error.
Screenshots stay in the test's temporary folder; nothing is compared against stored images.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from generator.serving.smoke import repository_models
from generator.specs.json_schema import schema_problems
from tests.manifest_helpers import REPO
from tests.process_helpers import run_cli
from tests.requirements import CHROMIUM, require

ZOO_MANIFEST = REPO / "tests" / "zoo" / "gen-repo.yaml"
EXAMPLE_MANIFEST = REPO / "examples" / "gen-repo.yaml"
#: Chromium with nothing of its own on the network (no updates, sync, account checks), so that every request its
#: network log records comes from the page; names resolve nowhere, so a request could not succeed either.
_CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-domain-reliability",
    "--disable-client-side-phishing-detection", "--host-resolver-rules=MAP * ~NOTFOUND",
]


def _diff_document(models: list[str]) -> dict[str, Any]:
    """A ``gen-repo diff --json`` document in its fixed schema (gen-repo-diff/1) about two of ``models``."""
    changed, unchanged = models[0], models[1:]
    return {
        "schema": "gen-repo-diff/1", "old": "s3://models/release-1", "new": "s3://models/release-2",
        "breaking": 1, "compatible": 1,
        "models": {"added": [], "removed": [], "changed": [changed], "unchanged": unchanged},
        "changes": [
            {"model": changed, "kind": "range_narrowed", "subject": "input_input_ids", "axis": 1, "old": [1, 64],
             "new": [6, 20], "classification": "breaking",
             "message": "input_input_ids axis 1 narrowed: 1..64 -> 6..20"},
            {"model": changed, "kind": "output_added", "subject": "output_extra", "axis": None, "old": None,
             "new": "output_extra", "classification": "compatible", "message": "output output_extra added"},
        ],
        "unknown": [{"model": changed, "fact": "value domains", "why": "the old repository has no contract.json"}],
    }


@pytest.fixture(scope="module")
def zoo_page(zoo_repository: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The zoo's report with real smoke and perf results: run on one launched server, rendered by the command."""
    require("tritonserver")
    from generator.serving.server import launch

    out = tmp_path_factory.mktemp("zoo_report")
    repo = str(zoo_repository)
    with launch(zoo_repository) as server:
        # The burst as tests/test_zoo.py sends it (enough in flight for the dynamic batcher to batch). Whether every
        # check passes is test_zoo's question; here a failed check must show on the page as failed (exit 1).
        code, text, _ = run_cli(["smoke", "--url", server.grpc_url, "--repo", repo, "--burst", "32", "--concurrency",
                                 "8", "--json", str(out / "smoke.json")], timeout=400)
        assert code in (0, 1), text
        code, text, _ = run_cli(["perf", "--url", server.grpc_url, "--repo", repo, "--model", "bert", "--model",
                                 "bert_classifier", "--engine", "loop", "--duration", "0.3", "--concurrency", "1",
                                 "--concurrency", "2", "--json", str(out / "perf.json")], timeout=120)
        assert code == 0, text
    (out / "diff.json").write_text(json.dumps(_diff_document(repository_models(zoo_repository))), encoding="utf-8")
    page = out / "report.html"
    code, text, _ = run_cli(["report", repo, "-o", str(page), "--smoke", str(out / "smoke.json"), "--perf",
                             str(out / "perf.json"), "--diff", str(out / "diff.json"), "--manifest",
                             str(ZOO_MANIFEST)], timeout=300)
    assert code == 0, text
    return {"page": page, "smoke": json.loads((out / "smoke.json").read_text()),
            "perf": json.loads((out / "perf.json").read_text()), "repository": zoo_repository}


def _chromium(page: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    require("chromium")
    profile = out / f"profile{len(list(out.glob('profile*')))}"
    return subprocess.run([str(CHROMIUM), *_CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
                          capture_output=True, text=True, timeout=120, check=True)


def _page_requests(net_log: Path) -> list[str]:
    """URLs the page asked the network for, from Chromium's NetLog (requests whose isolation key is the page's site).

    Chromium's own background requests carry another key (``--disable-background-networking`` stops most of them).
    """
    events = json.loads(net_log.read_text(encoding="utf-8"))["events"]
    return sorted({
        e["params"]["url"] for e in events
        if "file://" in str(e.get("params", {}).get("network_isolation_key", ""))
        and not str(e["params"].get("url", "file:")).startswith(("file:", "data:", "about:"))
    })


@pytest.fixture(scope="module")
def zoo_viewed(zoo_page: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Chromium's screenshot, DOM and network log of the zoo's page."""
    out = tmp_path_factory.mktemp("chromium")
    screenshot = out / "screenshot.png"
    _chromium(zoo_page["page"], out, "--window-size=1280,2400", f"--screenshot={screenshot}")
    dom = _chromium(zoo_page["page"], out, f"--log-net-log={out / 'net.json'}", "--dump-dom").stdout
    return {**zoo_page, "screenshot": screenshot, "dom": dom, "requests": _page_requests(out / "net.json")}


def _parse(html: str) -> ET.Element:
    import html5lib

    tree: ET.Element = html5lib.parse(html, namespaceHTMLElements=False)
    for element in tree.iter():  # SVG elements come namespaced: compare local names
        if isinstance(element.tag, str):
            element.tag = element.tag.rsplit("}", 1)[-1]
    return tree


def _text(element: ET.Element) -> str:
    return "".join(element.itertext())


def _section(tree: ET.Element, name: str) -> ET.Element:
    """The model's or ensemble's section (its heading names it)."""
    for section in tree.iter("section"):
        heading = section.find("h3")
        if heading is not None and heading.find("code") is not None and _text(heading.find("code")) == name:  # type: ignore[arg-type]
            return section
    raise AssertionError(f"no section for {name!r}")


def _svg_texts(element: ET.Element) -> set[str]:
    return {_text(t).strip() for svg in element.iter("svg") for t in svg.iter("text")}


@pytest.mark.triton
@pytest.mark.slow
def test_the_zoo_report_shows_every_model_chart_and_the_ensemble_in_chromium(zoo_viewed: dict[str, Any]) -> None:
    from PIL import Image

    from generator.client import ModelContract

    with Image.open(zoo_viewed["screenshot"]) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 16, "the screenshot is blank (one colour or nearly)"

    tree = _parse(zoo_viewed["dom"])
    repository = zoo_viewed["repository"]
    names = repository_models(repository)
    assert "bert_classifier" in names and len(names) == 16
    for name in names:
        section = _section(tree, name)
        contract = ModelContract.from_repository(repository, name)
        labels = _svg_texts(section.find(".//figure[@class='chart ranges']"))  # type: ignore[arg-type]
        # The shape-range chart: one panel titled with each input, a row per axis.
        assert {t.name for t in contract.inputs} <= labels, (name, labels)
        assert {f"axis {i}" for i in range(1, len(contract.inputs[0].min_shape))} <= labels, (name, labels)
        if contract.max_batch_size > 0:
            assert "axis 0 (batch)" in labels
        # Every smoke check of the model, each with its time.
        rows = [[_text(td) for td in tr.iter("td")] for tr in section.iter("tr") if tr.find("td") is not None
                and tr.get("class") in ("passed", "failed", "skipped", "error")]
        expected = [[r["model"], r["check"], r["status"], f"{r['duration_s']:.3f}"]
                    for r in zoo_viewed["smoke"]["results"] if r["model"] == name]
        assert [row[:4] for row in rows] == expected

    # The ensemble's picture: every step a box, every tensor an edge labelled with its name.
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config = text_format.Parse((repository / "bert_classifier" / "config.pbtxt").read_text(),
                               model_config_pb2.ModelConfig())
    graph = _section(tree, "bert_classifier").find(".//svg[@class='ensemble-graph']")
    assert graph is not None
    edge_labels = {_text(t) for t in graph.iter("text") if t.get("class") == "edge-label"}
    tensors = {v for step in config.ensemble_scheduling.step for v in (*step.input_map.values(),
                                                                      *step.output_map.values())}
    assert edge_labels == tensors and {"pooled", "logits"} <= edge_labels
    boxes = {_text(g.find("text")) for g in graph.iter("g") if g.get("class") == "node step"}  # type: ignore[arg-type]
    assert boxes == {step.model_name for step in config.ensemble_scheduling.step} == {"bert", "head"}
    assert len(list(graph.iter("line"))) == len([t for t in graph.iter("text") if t.get("class") == "edge-label"])

    # Perf: per measured model a chart of throughput and p50/p99 latency against concurrency.
    for name in ("bert", "bert_classifier"):
        charts = _section(tree, name).findall(".//figure[@class='chart perf']")
        assert len(charts) == 1, name
        labels = _svg_texts(charts[0])
        assert {"concurrency", "inferences/s", "latency (ms)", "p50", "p99", "1", "2"} <= labels, labels
        # The model's runtime alone drawn as the dashed ceiling the throughput is measured against.
        (ceiling,) = [c for c in zoo_viewed["perf"]["ceilings"] if c["model"] == name]
        if name == "bert_classifier":  # an ensemble has no runtime of its own: no ceiling, said why, none drawn
            assert ceiling["throughput"] is None and ceiling["skipped"], ceiling
            assert not [label for label in labels if label.startswith("ceiling")], labels
        else:
            assert f"ceiling {ceiling['throughput']:.0f}/s" in labels, labels
    assert _section(tree, "gpt2").find(".//figure[@class='chart perf']") is None

    summary = _text(tree.find(".//table[@class='summary']"))  # type: ignore[arg-type]
    assert "artifact(s) match gen-repo.lock.json" in summary and "0 error(s)" in summary
    assert ("passed:" if zoo_viewed["smoke"]["exit_code"] == 0 else "FAILED:") in summary
    assert "1 breaking, 1 compatible" in summary
    diff_rows = [_text(tr) for tr in tree.find(".//table[@class='diff']").iter("tr")]  # type: ignore[union-attr]
    assert any("range_narrowed" in row and "breaking" in row for row in diff_rows)
    # The plan's decisions, from the manifest, as `gen-repo plan` prints them.
    assert "steps run in order: bert -> head" in _text(_section(tree, "bert_classifier"))


@pytest.mark.triton
@pytest.mark.slow
def test_the_zoo_report_fetches_nothing_and_is_valid_html(zoo_viewed: dict[str, Any]) -> None:
    import html5lib

    html = zoo_viewed["page"].read_text(encoding="utf-8")
    # html5lib implements the WHATWG parsing algorithm; strict=True raises on the first parse error.
    html5lib.HTMLParser(strict=True).parse(html)
    assert zoo_viewed["requests"] == []
    tree = _parse(html)
    ids = [e.get("id") for e in tree.iter() if e.get("id") is not None]
    assert len(ids) > 100 and len(ids) == len(set(ids)), "an id repeats (charts inlined into one document)"
    assert [e.tag for e in tree.iter() if e.tag in ("script", "link", "img", "iframe", "object", "embed")] == []
    references = [value for e in tree.iter() for key, value in e.attrib.items()
                  if key.rsplit("}", 1)[-1] in ("src", "href")]
    assert references and all(ref.startswith("#") for ref in references), references
    styles = "".join(_text(s) for s in tree.iter("style"))
    assert "@import" not in styles and "url(" not in styles


@pytest.mark.requires("chromium")
def test_the_network_log_sees_a_page_that_fetches(tmp_path: Path) -> None:
    """The observer itself: a page with an external image is caught (so an empty list above means something)."""
    page = tmp_path / "fetching.html"
    page.write_text('<!DOCTYPE html><title>x</title><img src="https://example.invalid/x.png" alt="x">')
    _chromium(page, tmp_path, f"--log-net-log={tmp_path / 'net.json'}", "--dump-dom")
    assert _page_requests(tmp_path / "net.json") == ["https://example.invalid/x.png"]


def test_the_report_is_deterministic_and_needs_no_server(example_repository: Path, tmp_path: Path) -> None:
    pages = []
    for run in range(2):
        page = tmp_path / f"report{run}.html"
        code, text, _ = run_cli(["report", str(example_repository), "-o", str(page), "--manifest",
                                 str(EXAMPLE_MANIFEST)])
        assert code == 0, text
        pages.append(page.read_bytes())
    assert pages[0] == pages[1]
    tree = _parse(pages[0].decode("utf-8"))
    for name in ("mlp", "text"):
        section = _section(tree, name)
        assert "dynamic batching on" in _text(section)  # the plan's decision, not "unknown"
    assert "input_input_ids" in _svg_texts(_section(tree, "text"))


def test_the_decisions_shown_are_those_of_the_build_the_lock_records(example_repository: Path) -> None:
    """The example manifest says target auto; its repository was built with --target python (the lock says so): the
    page shows the plan of that build, not auto resolved again on this machine."""
    from generator.planning.options import BuildOptions
    from generator.planning.plan import describe_plan
    from generator.planning.targets import plan_build
    from generator.reports.html_page import build_report

    plan, _ = plan_build(EXAMPLE_MANIFEST, BuildOptions(target="python"))
    page = _text(_parse(build_report(str(example_repository), manifest=str(EXAMPLE_MANIFEST))))
    assert "target auto resolved" not in page
    for model in describe_plan(plan)["models"]:
        assert all(decision in page for decision in model["decisions"]), model["decisions"]


def test_without_a_manifest_the_decision_is_said_to_be_unknown(example_repository: Path) -> None:
    from generator.reports.html_page import DECISIONS_UNKNOWN, build_report

    tree = _parse(build_report(str(example_repository)))
    assert DECISIONS_UNKNOWN in _text(_section(tree, "mlp"))
    assert "max_batch_size 32; dynamic batching" in _text(_section(tree, "mlp"))


HOSTILE_MODEL = "<script>alert(1)"  # a folder name: no slash
HOSTILE_INPUT = "x</td><script>alert(2)</script>$\\alpha$"


def test_hostile_names_are_text_never_markup(example_repository: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    (repo / "mlp").rename(repo / HOSTILE_MODEL)
    for path in (repo / HOSTILE_MODEL / "config.pbtxt", repo / HOSTILE_MODEL / "1" / "gen_repo" / "contract.json"):
        path.write_text(path.read_text().replace('"input_x"', json.dumps(HOSTILE_INPUT)))
    contract = repo / HOSTILE_MODEL / "1" / "gen_repo" / "contract.json"  # a contract names its folder's model
    contract.write_text(json.dumps({**json.loads(contract.read_text()), "model": HOSTILE_MODEL}))
    smoke = tmp_path / "smoke.json"
    smoke.write_text(json.dumps({"format": "gen-repo-smoke/1", "results": [
        {"model": HOSTILE_MODEL, "check": "ready", "status": "failed", "duration_s": 0.5,
         "message": "<img src=x onerror=alert(3)>"}]}))
    page = tmp_path / "report.html"
    code, text, _ = run_cli(["report", str(repo), "-o", str(page), "--smoke", str(smoke)])
    assert code == 0, text
    html = page.read_text(encoding="utf-8")
    tree = _parse(html)
    assert [e for e in tree.iter() if e.tag in ("script", "img")] == []
    section = _section(tree, HOSTILE_MODEL)
    assert HOSTILE_INPUT in _text(section.find(".//table[@class='tensors']"))  # type: ignore[arg-type]
    assert HOSTILE_INPUT in _svg_texts(section)  # the chart's panel title: literal text, no mathtext
    assert "<img src=x onerror=alert(3)>" in _text(section.find(".//table[@class='smoke']"))  # type: ignore[arg-type]
    assert "<script>" not in html


def test_a_model_with_hundreds_of_inputs_charts_a_bounded_number_and_tables_them_all(example_repository: Path,
                                                                                      tmp_path: Path) -> None:
    """The text model with 300 inputs (its real first input, renamed): the inputs table lists every one with its
    range; the range chart draws the first CHARTED_INPUTS panels (matplotlib's layout cost grows faster than its
    panels: 400 inputs took minutes) and its caption says how many there are."""
    from generator.reports.html_page import CHARTED_INPUTS

    repo, count = tmp_path / "repo", 300
    shutil.copytree(example_repository, repo)
    contract_path, config_path = repo / "text" / "1" / "gen_repo" / "contract.json", repo / "text" / "config.pbtxt"
    contract = json.loads(contract_path.read_text())
    first = contract["inputs"][0]
    contract["inputs"] = [{**first, "name": f"ids_{i}"} for i in range(count)]
    contract_path.write_text(json.dumps(contract))
    config = config_path.read_text()
    entry = config[config.index("input {"):config.index("}", config.index("input {")) + 2]
    config = config.replace(entry, "".join(entry.replace(first["name"], f"ids_{i}") for i in range(count)), 1)
    config_path.write_text(re.sub(r'input \{\n  name: "input_attention_mask".*?\n\}\n', "", config, flags=re.S))
    page = tmp_path / "report.html"
    code, text, _ = run_cli(["report", str(repo), "-o", str(page)])
    assert code == 0, text
    section = _section(_parse(page.read_text(encoding="utf-8")), "text")
    rows = [_text(tr) for tr in section.find(".//table[@class='tensors']").iter("tr")][1:]  # type: ignore[union-attr]
    assert len(rows) == count and all(row.startswith(f"ids_{i}TYPE_INT64") for i, row in enumerate(rows))
    figure = section.find(".//figure[@class='chart ranges']")
    assert figure is not None
    panels = {label for label in _svg_texts(figure) if label.startswith("ids_")}
    assert panels == {f"ids_{i}" for i in range(CHARTED_INPUTS)}
    assert f"the first {CHARTED_INPUTS} of {count} inputs" in _text(figure.find("figcaption"))  # type: ignore[arg-type]


def test_an_ensemble_of_thousands_of_steps_and_perf_of_a_thousand_variants_draw_bounded_and_table_all(
        example_repository: Path, tmp_path: Path) -> None:
    """10,000 chained steps of the real mlp model and 1,000 perf variants of it: the picture draws CHARTED_STEPS
    boxes and the page CHARTED_VARIANTS perf charts (drawing took minutes before), while the steps table holds every
    step and the perf tables every measurement; the captions say what was left out."""
    from generator.reports.html_page import CHARTED_STEPS, CHARTED_VARIANTS
    from tests.report_scale import add_chain_ensemble, perf_document, write_perf_document

    repo, steps, variants = tmp_path / "repo", 10_000, 1_000
    shutil.copytree(example_repository, repo)
    add_chain_ensemble(repo, steps)
    perf = write_perf_document(tmp_path / "perf.json", variants)
    page = tmp_path / "report.html"
    code, text, _ = run_cli(["report", str(repo), "-o", str(page), "--perf", str(perf)], timeout=300)
    assert code == 0, text
    tree = _parse(page.read_text(encoding="utf-8"))
    chain = _section(tree, "chain")
    boxes = [g for g in chain.iter("g") if g.get("class") == "node step"]
    assert len(boxes) == CHARTED_STEPS
    assert len(chain.find(".//table[@class='steps']").findall(".//tr")) == steps + 1  # type: ignore[union-attr]
    assert f"the first {CHARTED_STEPS} of {steps} steps" in _text(chain.find(".//figure[@class='graph']"))  # type: ignore[arg-type]
    mlp = _section(tree, "mlp")
    assert len(mlp.findall(".//figure[@class='chart perf']")) == CHARTED_VARIANTS
    rows = sum(len(t.findall(".//tbody/tr")) for t in mlp.findall(".//table[@class='perf']"))
    assert rows == len(perf_document(variants)["results"])


def test_a_long_config_is_parsed_once_per_report_each_reader_getting_its_own_message(
        example_repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report reads every model (served reader) and lints the repository: a 2,000-step ensemble's config.pbtxt
    goes through protobuf's slow text parser once, not once per reader; each caller still gets a message of its own,
    and a long text that does not parse is refused naming the file each caller gave."""
    from click.testing import CliRunner
    from google.protobuf import text_format

    from generator.cli import main
    from generator.triton import proto
    from tests.report_scale import add_chain_ensemble

    repo = tmp_path / "repo"
    shutil.copytree(example_repository, repo)
    chain = add_chain_ensemble(repo, 2_000).joinpath("config.pbtxt").read_text(encoding="utf-8")
    assert len(chain) >= proto._MEMO_FROM
    proto._parsed_once.cache_clear()
    parsed: list[str] = []
    real_parse = text_format.Parse

    def counting_parse(text: Any, message: Any, *args: Any, **kwargs: Any) -> Any:
        parsed.append(text)
        return real_parse(text, message, *args, **kwargs)

    monkeypatch.setattr(text_format, "Parse", counting_parse)
    result = CliRunner().invoke(main, ["report", str(repo), "-o", str(tmp_path / "report.html")])
    assert result.exit_code == 0, result.output
    assert parsed.count(chain) == 1

    first = proto.parse_model_config(chain, "a/config.pbtxt")
    first.name = "changed"
    assert proto.parse_model_config(chain, "b/config.pbtxt").name == "chain"
    for where in ("a/config.pbtxt", "b/config.pbtxt"):
        with pytest.raises(proto.ConfigTextError) as refused:
            proto.parse_model_config(chain + "step {", where)
        assert refused.value.problems[0].file == where


def test_an_ensemble_picture_escapes_names_and_places_steps_by_their_inputs() -> None:
    from generator.reports.ensemble_svg import EnsembleStep, ensemble_svg

    steps = [EnsembleStep("late", {"a": "mid"}, {"y": "out"}),
             EnsembleStep("<b>early</b>", {"x": "in&"}, {"y": "mid"})]
    svg = ET.fromstring(ensemble_svg("e", ["in&"], ["out"], steps, salt="t"))
    texts = {t.text for t in svg.iter("text")}
    assert {"<b>early</b>", "late", "in&", "mid", "out"} <= texts
    boxes = {g.find("text").text: float(g.find("rect").get("x")) for g in svg.iter("g")  # type: ignore[union-attr]
             if g.get("class") == "node step"}
    assert boxes["<b>early</b>"] < boxes["late"]  # a step is drawn after the step it reads from


def test_bad_input_files_are_all_named_and_nothing_is_written(example_repository: Path, tmp_path: Path) -> None:
    smoke = tmp_path / "smoke.json"
    smoke.write_text(json.dumps({"format": "gen-repo-smoke/2", "results": [{"model": "mlp", "check": "ready"}]}))
    perf = tmp_path / "perf.json"
    perf.write_text("{not json")
    diff = tmp_path / "diff.json"
    diff.write_text(json.dumps({**_diff_document(["mlp", "text"]), "schema": "gen-repo-diff/9"}))
    page = tmp_path / "report.html"
    code, text, _ = run_cli(["report", str(example_repository), "-o", str(page), "--smoke", str(smoke), "--perf",
                             str(perf), "--diff", str(diff)])
    assert code == 2, text
    assert "Traceback" not in text and not page.exists()
    assert re.search(rf"{re.escape(str(smoke))}: /format: .*gen-repo-smoke/1", text), text
    assert re.search(rf"{re.escape(str(smoke))}: /results/0: .*status", text), text
    assert f"{perf}: " in text
    assert re.search(rf"{re.escape(str(diff))}: /schema: .*gen-repo-diff/1", text), text


def test_a_missing_repository_is_a_located_error(tmp_path: Path) -> None:
    code, text, _ = run_cli(["report", str(tmp_path / "nowhere"), "-o", str(tmp_path / "r.html")])
    assert code == 2 and f"{tmp_path / 'nowhere'}: /: not a directory" in text and "Traceback" not in text


@pytest.mark.slow
def test_a_published_repository_is_reported_from_its_bucket(store: Any, example_repository: Path,
                                                             tmp_path: Path) -> None:
    from generator.repository.publish import publish

    url = store.url("report")
    publish(example_repository, url)
    store.fs().pipe_file(store.key("report", "text/1/model.onnx"), b"not onnx")  # the lock check must see it
    page = tmp_path / "report.html"
    code, text, _ = run_cli(["report", url, "-o", str(page)])
    assert code == 0, text
    tree = _parse(page.read_text(encoding="utf-8"))
    assert _text(tree.find(".//code")) == url  # type: ignore[arg-type]
    assert {"input_x"} <= _svg_texts(_section(tree, "mlp")) and _section(tree, "text") is not None
    # verify's answer, naming the object in the bucket (never the temporary copy the page was made from).
    assert f"{url}/text/1/model.onnx" in _text(tree.find(".//ul[@class='problems']"))  # type: ignore[arg-type]
    assert "1 difference(s) from gen-repo.lock.json" in _text(tree.find(".//table[@class='summary']"))  # type: ignore[arg-type]

    code, text, _ = run_cli(["report", store.dead_url("report"), "-o", str(tmp_path / "dead.html")],
                            env=store.dead_env())
    assert code == 3 and "Traceback" not in text and not (tmp_path / "dead.html").exists(), text


def test_links_planted_beside_the_page_are_never_written_through(example_repository: Path, tmp_path: Path) -> None:
    """A symlink at the partial page's old, predictable name (.NAME.partial) and one at the page's own name: the
    page is written to a fresh temporary file and renamed over its name, so neither link's target changes."""
    target = tmp_path / "precious"
    target.write_text("precious")
    page = tmp_path / "page.html"
    (tmp_path / ".page.html.partial").symlink_to(target)
    code, text, _ = run_cli(["report", str(example_repository), "-o", str(page)])
    assert code == 0, text
    assert target.read_text() == "precious"
    assert not page.is_symlink() and page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    page.unlink()
    page.symlink_to(target)
    code, text, _ = run_cli(["report", str(example_repository), "-o", str(page)])
    assert code == 0, text
    assert target.read_text() == "precious" and not page.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".page.html.partial", "page.html", "precious"]


def test_an_output_folder_that_is_not_there_is_a_located_error(example_repository: Path, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "report.html"
    code, text, _ = run_cli(["report", str(example_repository), "-o", str(target)])
    assert code == 2 and f"{target}: /: --output: cannot write this file: no folder" in text, text
    assert "Traceback" not in text


def test_the_real_diff_of_a_rebuild_is_shown_change_by_change(example_repository: Path,
                                                               variant_example_repository: Path,
                                                               tmp_path: Path) -> None:
    """`gen-repo diff --json` of the examples against their rebuild with known changes, as the page lists it."""
    code, diff_text, _ = run_cli(["diff", str(example_repository), str(variant_example_repository), "--json"])
    assert code == 1, diff_text  # the rebuild breaks text's clients
    diff = json.loads(diff_text)
    (tmp_path / "diff.json").write_text(diff_text, encoding="utf-8")
    page = tmp_path / "report.html"
    code, text, _ = run_cli(["report", str(variant_example_repository), "-o", str(page), "--diff",
                             str(tmp_path / "diff.json")])
    assert code == 0, text
    tree = _parse(page.read_text(encoding="utf-8"))
    rows = [[_text(td) for td in tr.iter("td")] for tr in tree.find(".//table[@class='diff']").iter("tr")]  # type: ignore[union-attr]
    shown = [tuple(row[:4]) for row in rows if row]
    assert shown == [(c["model"], c["classification"], c["kind"], c["subject"]) for c in diff["changes"]]
    assert {c["kind"] for c in diff["changes"]} >= {"input_removed", "data_type", "output_added"}
    summary = _text(tree.find(".//table[@class='summary']"))  # type: ignore[arg-type]
    assert f"{diff['breaking']} breaking, {diff['compatible']} compatible" in summary


#: A real ``gen-repo tune --report`` document: the example built for the python target, then
#: ``gen-repo tune REPO --budget 40 --concurrency 8 --concurrency 32 --report example_tune.json`` on this machine.
TUNE_JSON = Path(__file__).resolve().parents[1] / "data" / "tune" / "example_tune.json"


def test_the_tune_schema_accepts_a_tune_document_and_locates_what_is_wrong() -> None:
    document = json.loads(TUNE_JSON.read_text())
    assert schema_problems(document, "report_tune.schema.json", str(TUNE_JSON)) == []
    broken = json.loads(TUNE_JSON.read_text())
    broken["engine"] = "threads"
    del broken["models"][0]["candidates"][1]["results"][0]["p99_ms"]
    problems = [f"{p.pointer}: {p.message}" for p in schema_problems(broken, "report_tune.schema.json", "t.json")]
    assert any(p.startswith("/engine: ") for p in problems), problems
    assert any(p.startswith("/models/0/candidates/1/results/0: ") and "'p99_ms' is a required property" in p
               for p in problems), problems


def test_a_tune_report_with_a_ceiling_draws_it_and_gives_each_candidate_its_fraction(example_repository: Path,
                                                                                    tmp_path: Path) -> None:
    """The ceiling measured for real on the same model; the document without it (above) stays valid."""
    from generator.serving.ceiling import measure_ceiling

    document = json.loads(TUNE_JSON.read_text())
    (entry,) = [m for m in document["models"] if m["model"] == "text"]
    ceiling = measure_ceiling(example_repository, "text", seconds=0.3).to_dict()
    entry["ceiling"], entry["best_of_ceiling"] = ceiling, round(entry["best"]["score"] / ceiling["throughput"], 3)
    assert schema_problems(document, "report_tune.schema.json", "t.json") == []
    path, page = tmp_path / "tune.json", tmp_path / "report.html"
    path.write_text(json.dumps({**document, "models": [entry]}))
    code, text, _ = run_cli(["report", str(example_repository), "-o", str(page), "--tune", str(path)])
    assert code == 0, text
    section = _section(_parse(page.read_text()), "text")
    (figure,) = [f for f in section.iter("figure") if "tune" in (f.get("class") or "")]
    assert f"ceiling {ceiling['throughput']:.0f}/s" in _svg_texts(figure)
    assert f"ceiling: {ceiling['throughput']}/s (onnxruntime" in _text(figure)
    rows = [[_text(td) for td in tr.iter("td")] for tr in section.iter("tr")
            if tr.find("td") is not None and "delay" in _text(tr)]
    assert [r[4] for r in rows] == [str(round(c["score"] / ceiling["throughput"], 3)) for c in entry["candidates"]]


def test_a_tune_report_charts_every_candidate_with_the_baseline_and_best_marked(example_repository: Path,
                                                                                tmp_path: Path) -> None:
    document = json.loads(TUNE_JSON.read_text())
    text_only = tmp_path / "tune.json"  # mlp left out: its section says it was not tuned
    text_only.write_text(json.dumps({**document, "models": [m for m in document["models"] if m["model"] == "text"]}))
    (tuned,) = [m for m in document["models"] if m["model"] == "text"]
    page = tmp_path / "report.html"
    code, text, _ = run_cli(["report", str(example_repository), "-o", str(page), "--tune", str(text_only)])
    assert code == 0, text
    tree = _parse(page.read_text())
    summary = _text(next(tree.iter("table")))
    assert f"1 model(s) tuned on {document['hardware']}, engine {document['engine']}" in summary
    section = _section(tree, "text")
    assert "Tuning" in _text(section)
    (figure,) = [f for f in section.iter("figure") if "tune" in (f.get("class") or "")]
    svg_text = _svg_texts(figure)
    levels = tuned["concurrency"]
    assert {*(f"concurrency {c}" for c in levels), "best", "baseline", "inferences/s", "p99 latency (ms)"} <= svg_text
    # One marker per candidate and concurrency (a best that is also the baseline twice), plus one per legend entry.
    candidates = tuned["candidates"]
    roles = {"baseline", "best"} | ({"tried"} if len(candidates) > 2 else set())
    same = tuned["best"] == tuned["baseline"]
    markers = [u for g in figure.iter("g") if "PathCollection" in (g.get("id") or "") for u in g.iter("use")]
    assert len(markers) == len(levels) * (len(candidates) + (1 if same else 0) + len(roles))
    rows = [[_text(td) for td in tr.iter("td")] for tr in section.iter("tr")
            if tr.find("td") is not None and "delay" in _text(tr)]
    assert len(rows) == len(candidates)

    def words(candidate: dict) -> str:
        preferred = candidate["preferred_batch_size"]
        return (f"{candidate['kind']} x{candidate['instance_count']}, delay "
                f"{candidate['max_queue_delay_microseconds']} us, preferred {preferred if preferred else 'none'}")

    assert [r[0] for r in rows if r[1] == "best"] == [words(tuned["best"])]
    if not same:
        assert [r[0] for r in rows if r[1] == "baseline"] == [words(tuned["baseline"])]
    assert "not tuned in the tune run" in _text(_section(tree, "mlp"))
    # Same inputs, same bytes; both models of the real report charted.
    from generator.reports.html_page import build_report, load_inputs

    inputs = load_inputs(tune=str(TUNE_JSON))
    first = build_report(str(example_repository), inputs)
    assert first == build_report(str(example_repository), inputs)
    assert "not tuned in the tune run" not in first


def test_a_bad_tune_file_is_located_and_nothing_is_written(example_repository: Path, tmp_path: Path) -> None:
    document = json.loads(TUNE_JSON.read_text())
    document["models"][0]["best"]["instance_count"] = 0
    bad = tmp_path / "tune.json"
    bad.write_text(json.dumps(document))
    page = tmp_path / "report.html"
    code, text, _ = run_cli(["report", str(example_repository), "-o", str(page), "--tune", str(bad)])
    assert code == 2 and "Traceback" not in text and not page.exists(), text
    assert f"{bad}: /models/0/best/instance_count: " in text
