"""JUnit XML: one ``testsuite`` named ``torchport check``, one ``testcase`` per check.

fail -> ``<failure message=summary>`` with the evidence as text; skip -> ``<skipped>``;
warn -> passes, with the warnings in ``<system-out>`` (CI stays green, the text is kept).
Built with :mod:`xml.etree.ElementTree`, so the output is always well-formed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from torchport.checks.result import Report, Status

__all__ = ["to_junit"]


def _evidence_text(result) -> str:
    lines = []
    for e in result.evidence:
        line = f"[{e.status.value}] {e.what}: {e.measured}"
        if e.threshold is not None:
            line += f" (limit {e.threshold})"
        if e.where:
            line += f" at {e.where}"
        if e.detail and e.status in (Status.WARN, Status.FAIL):
            line += f" -- {e.detail}"
        lines.append(line)
    return "\n".join(lines)


def to_junit(report: Report) -> str:
    """The report as a JUnit XML document (string)."""
    c = report.counts()
    suites = ET.Element("testsuites", name="torchport", tests=str(len(report.results)), failures=str(c["fail"]),
                        errors="0", skipped=str(c["skip"]))
    suite = ET.SubElement(suites, "testsuite", name="torchport check", tests=str(len(report.results)),
                          failures=str(c["fail"]), errors="0", skipped=str(c["skip"]),
                          time=f"{sum(r.seconds for r in report.results):.3f}")
    props = ET.SubElement(suite, "properties")
    for key in ("target", "device", "torch"):
        if key in report.meta:
            ET.SubElement(props, "property", name=key, value=str(report.meta[key]))
    for r in report.results:
        case = ET.SubElement(suite, "testcase", classname="torchport.check", name=r.name, time=f"{r.seconds:.3f}")
        text = _evidence_text(r)
        if r.status is Status.FAIL:
            fail = ET.SubElement(case, "failure", message=r.summary[:500], type="CheckFailed")
            fail.text = text
        elif r.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=r.summary[:500])
        if r.status is Status.WARN or r.status is Status.PASS:
            out = ET.SubElement(case, "system-out")
            out.text = (f"WARN: {r.summary}\n" if r.status is Status.WARN else "") + text
    if hasattr(ET, "indent"):  # Python >= 3.9
        ET.indent(suites)
    from torchport._escape import xml_text

    return xml_text(ET.tostring(suites, encoding="unicode", xml_declaration=True))   # no control characters
