r"""Smoke reports as files: JUnit XML for CI systems and JSON for machines.

One ``<testsuite>`` per model and ``<testcase>`` per check, the details as JSON in a failure's text. Characters XML
1.0 cannot carry become their Python escapes, so any model folder name gives a well-formed report.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

from generator.serving.smoke_results import CheckResult, SmokeReport

__all__ = ["json_report", "junit_xml", "xml_safe"]

#: The element a non-passing status becomes.
_ELEMENT = {"failed": "failure", "error": "error", "skipped": "skipped"}
#: What XML 1.0 cannot carry (its Char production, inverted): most C0 controls, surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    r"""``text`` with every character XML 1.0 cannot carry replaced by its Python escape (``\x1b``)."""
    return _NOT_XML.sub(lambda match: match.group().encode("unicode_escape", "backslashreplace").decode("ascii"),
                        text)


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _counts(results: list[CheckResult]) -> dict[str, str]:
    return {
        "tests": str(len(results)),
        "failures": str(sum(r.status == "failed" for r in results)),
        "errors": str(sum(r.status == "error" for r in results)),
        "skipped": str(sum(r.status == "skipped" for r in results)),
        "time": _seconds(sum(r.duration_s for r in results)),
    }


def junit_xml(report: SmokeReport, suite_name: str = "gen-repo smoke") -> str:
    """The JUnit XML document for ``report`` (UTF-8 text with an XML declaration)."""
    root = ET.Element("testsuites", {"name": suite_name, **_counts(report.results)})
    for model in report.models:
        results = [r for r in report.results if r.model == model]
        suite = ET.SubElement(root, "testsuite", {"name": model, **_counts(results)})
        properties = ET.SubElement(suite, "properties")
        for name, value in (("server_url", report.server_url), ("protocol", report.protocol)):
            ET.SubElement(properties, "property", {"name": name, "value": value})
        for result in results:
            case = ET.SubElement(
                suite, "testcase", {"classname": model, "name": result.check, "time": _seconds(result.duration_s)}
            )
            element = _ELEMENT.get(result.status)
            if element is None:
                if result.message:
                    ET.SubElement(case, "system-out").text = result.message
                continue
            child = ET.SubElement(case, element, {"message": result.message})
            if element != "skipped":
                child.set("type", result.status)
                child.text = _failure_text(result)
    for node in root.iter():  # every name, message and detail, wherever it came from
        node.attrib = {key: xml_safe(value) for key, value in node.attrib.items()}
        if node.text:
            node.text = xml_safe(node.text)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _failure_text(result: CheckResult) -> str:
    details = result.to_dict()["details"]
    if not details:
        return result.message
    return f"{result.message}\n\ndetails:\n{json.dumps(details, indent=2, sort_keys=True)}"


def json_report(report: SmokeReport) -> str:
    """The JSON report text: sorted keys, 2-space indent, trailing newline."""
    document: dict[str, Any] = report.to_dict()
    return json.dumps(document, indent=2, sort_keys=True) + "\n"

